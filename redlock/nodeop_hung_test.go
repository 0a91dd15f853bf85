package redlock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// hungTimeout is the node timeout of the hung-node tests, and hungBound the
// bound they assert on a call that meets a hung node: several node timeouts
// for a loaded machine, far below go-redis's own defaults (a 5 s dial and
// read timeout, 5 dial attempts) that a wait not bounded by the lock would
// run into.
const (
	hungTimeout = 200 * time.Millisecond
	hungBound   = 2 * time.Second
)

// defaultClient is a client as a caller would make it with go-redis's
// defaults: retries on, context deadlines ignored, 5 s timeouts. The lock
// must bound its calls all the same.
func defaultClient(t *testing.T, addr string, tlsConfig *tls.Config) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: tlsConfig})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// within runs f and fails the test if it takes longer than bound.
func within(t *testing.T, what string, bound time.Duration, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if d := time.Since(start); d > bound {
		t.Errorf("%s took %v, want < %v", what, d.Round(time.Millisecond), bound)
	}
}

// A node that accepts connections and never answers delays no call beyond
// about the node timeout: not Obtain, not Release, not Close.
func TestHungNodeDelaysNothing(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{})
	noTLS := (*tls.Config)(nil)
	withTLS := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // no server to verify: it never answers
	tests := []struct {
		name string
		tls  *tls.Config
		hung int // how many of the three nodes hang
	}{
		{"one of three hung", noTLS, 1},
		{"two of three hung", noTLS, 2},
		{"one of three hung, TLS", withTLS, 1},
		{"two of three hung, TLS", withTLS, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var clients []*redis.Client
			var hung []*redistest.Hung
			for i, s := range servers {
				addr := s.Addr
				if i < tt.hung {
					h := redistest.HangT(t)
					hung = append(hung, h)
					addr = h.Addr
				} else if tt.tls != nil {
					// The healthy nodes speak plain RESP.
					clients = append(clients, defaultClient(t, addr, nil))
					continue
				}
				clients = append(clients, defaultClient(t, addr, tt.tls))
			}
			l := newHungLocker(t, clients, redlock.WithRetry(redlock.NoRetry()))
			key := "hung-" + t.Name()
			within(t, "Obtain", hungBound, func() {
				lock, err := l.Obtain(t.Context(), key)
				if tt.hung == 1 {
					if err != nil {
						t.Fatalf("Obtain with one hung node of three: %v", err)
					}
					if err := lock.Release(t.Context()); err != nil {
						t.Fatalf("Release: %v", err)
					}
					return
				}
				if !errors.Is(err, redlock.ErrNoQuorum) {
					t.Fatalf("Obtain with two hung nodes of three: %v, want ErrNoQuorum", err)
				}
			})
			for _, h := range hung {
				if h.Accepted() == 0 {
					t.Errorf("the hung node %s was never dialled: the test proves nothing", h.Addr)
				}
			}
			closeWithin(t, l)
		})
	}
}

// Waiting for a release subscribes on every node; a hung node's
// subscription must not hold up the waiter, nor Close.
func TestHungNodeDoesNotHoldUpWaiters(t *testing.T) {
	servers := redistest.StartT(t, 2, redistest.Options{})
	h := redistest.HangT(t)
	clients := []*redis.Client{
		defaultClient(t, servers[0].Addr, nil),
		defaultClient(t, servers[1].Addr, nil),
		defaultClient(t, h.Addr, nil),
	}
	l := newHungLocker(t, clients)
	held, err := l.TryObtain(t.Context(), "w")
	if err != nil {
		t.Fatal(err)
	}
	// A second Locker over the same nodes waits for the holder: it
	// subscribes to the release channel on every node, the hung one too.
	waiter := newHungLocker(t, clients)
	ctx, cancel := context.WithTimeout(t.Context(), 3*hungTimeout)
	defer cancel()
	within(t, "a waiting Obtain with a 600ms deadline", hungBound, func() {
		if _, err := waiter.Obtain(ctx, "w"); !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("waiting Obtain: %v, want ErrNotObtained", err)
		}
	})
	closeWithin(t, waiter)
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	closeWithin(t, l)
}

// A client with TLS facing a server's plain port waits in its handshake for
// a reply that never comes (the server takes the handshake for the start of
// a command); the lock bounds that wait by the node timeout.
func TestTLSClientOnPlainPort(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{})
	clients := []*redis.Client{
		defaultClient(t, servers[0].Addr, nil),
		defaultClient(t, servers[1].Addr, nil),
		defaultClient(t, servers[2].Addr, &tls.Config{InsecureSkipVerify: true}), //nolint:gosec // the handshake never completes
	}
	l := newHungLocker(t, clients, redlock.WithRetry(redlock.NoRetry()))
	within(t, "Obtain and Release", hungBound, func() {
		lock, err := l.Obtain(t.Context(), "tls")
		if err != nil {
			t.Fatalf("Obtain with a TLS client on a plain port: %v", err)
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
	closeWithin(t, l)
}

// hungLocker is a Locker of a hung-node test: node timeout hungTimeout,
// then opts. It is closed at cleanup unless the test closed it with
// closeWithin.
type hungLocker struct {
	*redlock.Locker
	closed bool
}

func newHungLocker(t *testing.T, clients []*redis.Client, opts ...redlock.Option) *hungLocker {
	t.Helper()
	l, err := redlock.New(clients, append([]redlock.Option{redlock.WithNodeTimeout(hungTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	h := &hungLocker{Locker: l}
	t.Cleanup(func() {
		if !h.closed {
			if err := l.Close(); err != nil {
				t.Errorf("Close at cleanup: %v", err)
			}
		}
	})
	return h
}

// closeWithin closes l, and fails the test unless Close returns within
// hungBound.
func closeWithin(t *testing.T, l *hungLocker) {
	t.Helper()
	within(t, "Close", hungBound, func() {
		l.closed = true
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
