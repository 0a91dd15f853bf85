package doctor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/locktest"
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

// newLocker returns a Locker over clients with testOpts and opts, closed at
// cleanup.
func newLocker(t *testing.T, clients []*redis.Client, opts ...redlock.Option) *redlock.Locker {
	t.Helper()
	return locktest.NewT(t, clients, slices.Concat(testOpts, opts)...)
}
