package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

// A script is sent once, whatever becomes of it, though the caller's client
// retries commands (go-redis's default, MaxRetries 3): a node may have
// applied a script whose reply was lost, and a second run would be a second
// vote of the same node (or, for a release, undo a later hold).
func TestNoScriptSentTwice(t *testing.T) {
	c := newCluster(t, 1)
	w := newWire(t, c.servers[0], func(o *redis.Options) {
		o.MaxRetries = 0 // go-redis's default: 3 retries
		o.ContextTimeoutEnabled = false
	})
	w.cut = true
	l := newLocker(t, []*redis.Client{w.Client}, redlock.WithNodeTimeout(time.Second))
	// Two attempts: the first on a fresh connection (a pipeline), the
	// second after the undo of the first, on another.
	for range 2 {
		if _, err := l.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNoQuorum) {
			t.Fatalf("TryObtain with every reply lost: %v, want ErrNoQuorum", err)
		}
	}
	// Close waits for the undo of the failed attempts.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := w.calls(); n != 4 {
		t.Fatalf("%d scripts reached the node, want 4 (two acquisitions and their undos, once each)", n)
	}
}

// A caller's client that ignores context deadlines (ContextTimeoutEnabled
// false, go-redis's default) still gets every node call bounded by the node
// timeout: a paused node holds up neither Obtain nor Close.
func TestPausedNodeBoundedWithoutContextTimeouts(t *testing.T) {
	c := newCluster(t, 3)
	var clients []*redis.Client
	for _, s := range c.servers {
		clients = append(clients, defaultClient(t, s.Addr, nil))
	}
	l := newHungLocker(t, clients, redlock.WithRetry(redlock.NoRetry()))
	if err := c.servers[2].Pause(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		within(t, "Obtain and Release with a paused node", hungBound, func() {
			lock, err := l.Obtain(t.Context(), "p")
			if err != nil {
				t.Fatalf("Obtain with one paused node of three: %v", err)
			}
			if err := lock.Release(t.Context()); err != nil {
				t.Fatalf("Release: %v", err)
			}
		})
	}
	if err := c.servers[1].Pause(); err != nil {
		t.Fatal(err)
	}
	within(t, "Obtain with two paused nodes", hungBound, func() {
		if _, err := l.Obtain(t.Context(), "p"); !errors.Is(err, redlock.ErrNoQuorum) {
			t.Fatalf("Obtain with two paused nodes of three: %v, want ErrNoQuorum", err)
		}
	})
	closeWithin(t, l)
}
