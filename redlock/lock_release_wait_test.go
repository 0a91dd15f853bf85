package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// releaseTimeout is the node timeout of the tests below: their queues are
// held for several of it.
const releaseTimeout = 100 * time.Millisecond

// queuedRelease obtains key on a 3-node cluster and stops the workers of its
// queue on a majority, as on a process too busy to send its calls within
// the node timeout. It returns the lock and the func that lets the workers
// go (called at cleanup too; only the first call acts).
func queuedRelease(t *testing.T, key string, opts ...redlock.Option) (*cluster, *redlock.Lock, func()) {
	t.Helper()
	c := newCluster(t, 3)
	l := c.locker(t, append([]redlock.Option{redlock.WithNodeTimeout(releaseTimeout)}, opts...)...)
	lock := mustObtain(t, l, key)
	// Every node granted, so each queue has its connection open: what
	// the release waits for is the queue alone.
	c.heldEverywhere(t, key, lock.Token())
	var held []func()
	for i := range 2 {
		held = append(held, redlock.HoldQueue(l, i, key))
	}
	letGo := sync.OnceFunc(func() {
		for _, f := range held {
			f()
		}
	})
	t.Cleanup(letGo)
	return c, lock, letGo
}

func TestReleaseWaitsForQueuedCalls(t *testing.T) {
	c, lock, letGo := queuedRelease(t, "queued")
	const held = 4 * releaseTimeout
	timer := time.AfterFunc(held, letGo)
	defer timer.Stop()
	began := time.Now()
	if err := lock.Release(t.Context()); err != nil {
		t.Fatalf("Release with its calls queued for %v (node timeout %v): %v, want nil: the calls went out and deleted the keys", held, releaseTimeout, err)
	}
	if d := time.Since(began); d < held {
		t.Fatalf("Release returned after %v, before its queued calls could be sent (%v)", d, held)
	}
	if !c.emptied(t, "queued") {
		t.Fatalf("key left after the release: %q", c.values(t, "queued"))
	}
}

func TestReleaseWaitEndsWithCtx(t *testing.T) {
	c, lock, letGo := queuedRelease(t, "cut")
	ctx, cancel := context.WithTimeout(t.Context(), 3*releaseTimeout)
	defer cancel()
	began := time.Now()
	err := lock.Release(ctx)
	d := time.Since(began)
	if !errors.Is(err, redlock.ErrNoQuorum) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Release whose ctx ended while its calls were queued: %v, want ErrNoQuorum and context.DeadlineExceeded", err)
	}
	// The lock's validity is about 10s: a Release that ignored ctx would
	// wait that long.
	if d > 3*time.Second {
		t.Fatalf("Release returned %v after its ctx ended (%v)", d, 3*releaseTimeout)
	}
	// Its calls stay queued and still go out.
	letGo()
	if !c.emptied(t, "cut") {
		t.Fatalf("key left after the queued release went out: %q", c.values(t, "cut"))
	}
}

func TestReleaseWaitEndsWithValidity(t *testing.T) {
	const ttl = 800 * time.Millisecond
	_, lock, _ := queuedRelease(t, "expiring", redlock.WithTTL(ttl))
	began := time.Now()
	err := lock.Release(context.Background())
	d := time.Since(began)
	if !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Release whose calls stayed queued past the lock's validity: %v, want ErrNoQuorum", err)
	}
	if d > ttl+2*time.Second {
		t.Fatalf("Release returned after %v, long after the lock's validity (TTL %v)", d, ttl)
	}
}

// A release whose ctx has ended (a deferred Release of a cancelled
// request, say) still goes out and reports what the nodes did.
func TestReleaseWithEndedCtxReleases(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "ended")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release with an ended ctx: %v, want nil", err)
	}
	if !c.emptied(t, "ended") {
		t.Fatalf("key left after the release: %q", c.values(t, "ended"))
	}
}
