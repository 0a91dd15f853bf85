package redistest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// QuietLogger drops go-redis's own log lines (failed dials to nodes the
// tests killed on purpose).
type QuietLogger struct{}

func (QuietLogger) Printf(context.Context, string, ...any) {}

// Main is a test binary's TestMain: it silences go-redis's log, starts n
// servers for the runnable examples (their addresses go to *addrs), runs the
// tests, stops the servers, and fails the binary on a leaked goroutine. It
// exits the process.
func Main(m *testing.M, n int, addrs *[]string) {
	redis.SetLogger(QuietLogger{})
	servers, err := StartN(n, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, s := range servers {
		*addrs = append(*addrs, s.Addr)
	}
	code := m.Run()
	for _, s := range servers {
		_ = s.Close()
	}
	os.Exit(LeakCheck(code))
}

// LeakCheck is the end of a TestMain: given the tests' exit code, it
// returns 1 when they passed but left a goroutine behind (saying which on
// standard error), and code otherwise. go-redis's dial prober is not
// counted: it redials a dead node from a goroutine that notices its pool
// was closed only after its one-second sleep, and then ends.
func LeakCheck(code int) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		return 1
	}
	return code
}
