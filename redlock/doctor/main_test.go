package doctor_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// exampleAddrs are three servers that the runnable example uses.
var exampleAddrs []string

// TestMain starts the example's servers, and fails the run on a goroutine
// left behind.
func TestMain(m *testing.M) {
	redistest.Main(m, 3, &exampleAddrs)
}

// testOpts are the settings of the tests' Lockers: generous node timeouts
// for a loaded machine under -race.
var testOpts = []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithTTL(10 * time.Second)}

// plainClients returns a plain client per server, closed at cleanup.
func plainClients(t *testing.T, servers []*redistest.Server) []*redis.Client {
	t.Helper()
	out := make([]*redis.Client, len(servers))
	for i, s := range servers {
		out[i] = s.NewClient()
		t.Cleanup(func() { _ = out[i].Close() })
	}
	return out
}

// newLocker returns a Locker over clients with testOpts and opts, closed at
// cleanup.
func newLocker(t *testing.T, clients []*redis.Client, opts ...redlock.Option) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(clients, append(append([]redlock.Option{}, testOpts...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}
