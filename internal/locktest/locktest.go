// Package locktest holds the test fixtures that need the lock library
// itself, shared by the tests of the library, its deployment checker, its
// fenced writes, the chaos suite and the OpenTelemetry adapter. Fixtures
// that need only Redis live in internal/redistest, which the library's own
// internal tests import, so it cannot import the library.
package locktest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// NewT returns a Locker over clients with opts, closed at the test's
// cleanup; an error from New or Close fails the test.
func NewT(t testing.TB, clients []*redis.Client, opts ...redlock.Option) *redlock.Locker {
	t.Helper()
	l, err := redlock.New(clients, opts...)
	return closedAtCleanup(t, l, err)
}

// NodesT returns a Locker over nodes with opts (NewNodes), closed at the
// test's cleanup; an error from NewNodes or Close fails the test.
func NodesT(t testing.TB, nodes []redlock.Node, opts ...redlock.Option) *redlock.Locker {
	t.Helper()
	l, err := redlock.NewNodes(nodes, opts...)
	return closedAtCleanup(t, l, err)
}

// closedAtCleanup returns l, made with err, to be closed at the test's
// cleanup; err, or an error from Close, fails the test.
func closedAtCleanup(t testing.TB, l *redlock.Locker, err error) *redlock.Locker {
	t.Helper()
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

// FencedT returns a fencing Locker over three fresh redis-servers, with a
// node timeout of 200ms and a retry every 20ms, closed at the test's
// cleanup, as are the servers.
func FencedT(t testing.TB) *redlock.Locker {
	t.Helper()
	clients := redistest.ClientsT(t, redistest.StartT(t, 3, redistest.Options{}))
	return NewT(t, clients, redlock.WithFencing(), redlock.WithNodeTimeout(200*time.Millisecond),
		redlock.WithRetry(redlock.LinearBackoff(20*time.Millisecond)))
}
