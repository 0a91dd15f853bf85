package redlockotel_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/internal/redistest"
)

// exampleAddrs are three servers that the runnable examples use.
var exampleAddrs []string

// quietLogger drops go-redis's own log lines (dials to nodes the tests
// killed on purpose).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	servers, err := redistest.StartN(3, redistest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, s := range servers {
		exampleAddrs = append(exampleAddrs, s.Addr)
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
