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
	if code == 0 {
		// go-redis redials a dead node from a goroutine that notices its
		// pool was closed only after its one-second sleep: not ours.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
