package doctor

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// oneLine is an error's message on one line, without the library's prefix.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "redlock: ")), " ")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// roundDur rounds a duration for people: to the microsecond below a
// millisecond, to 10 µs below a second, to the millisecond above.
func roundDur(d time.Duration) time.Duration {
	switch {
	case absDur(d) < time.Millisecond:
		return d.Round(time.Microsecond)
	case absDur(d) < time.Second:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// nodeCount is "1 node" or "n nodes".
func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}

// signed is a duration with its sign: "+1.2ms", "-30µs".
func signedDur(d time.Duration) string {
	if r := roundDur(d); r >= 0 {
		return "+" + r.String()
	}
	return roundDur(d).String()
}

// percent is a fraction as a signed percentage: "+50.000%".
func fmtPercent(f float64) string { return fmt.Sprintf("%+.3f%%", 100*f) }

// bytes is a size for people: "1.5MB".
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KB", "MB", "GB", "TB"} {
		v, suffix = v/unit, s
		if v < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f%s", v, suffix)
}
