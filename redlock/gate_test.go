package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

// awaitLine waits until n goroutines of l wait in line for key.
func awaitLine(t *testing.T, l *redlock.Locker, key string, n int) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for redlock.LineLen(l, key) != n {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("line for %q has %d waiters, want %d", key, redlock.LineLen(l, key), n)
		}
	}
}

// Waiters of one Locker get the lock in the order they came.
func TestLocalWaitersTakeTurns(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	held := mustObtain(t, l, "q")
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range 5 {
		wg.Go(func() {
			lock, err := l.Obtain(t.Context(), "q", redlock.WithRetry(redlock.LinearBackoff(5*time.Second)))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := lock.Release(context.Background()); err != nil {
				t.Error(err)
			}
		})
		awaitLine(t, l, "q", i+1)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("acquisition order %v, want 0 1 2 3 4", order)
		}
	}
	if n := redlock.LineLen(l, "q"); n != 0 {
		t.Fatalf("line left with %d waiters", n)
	}
}

// Only the head of the line talks to the nodes: a crowd of local waiters
// costs no more Redis commands than one.
func TestQueuedWaitersSendNothing(t *testing.T) {
	c := newCluster(t, 1)
	counter := newWire(t, c.servers[0])
	l := newLocker(t, []*redis.Client{counter.Client})
	held := mustObtain(t, l, "q")
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := l.Obtain(ctx, "q", redlock.WithRetry(redlock.LinearBackoff(2*time.Second))); err == nil {
				t.Error("a waiter got a lock that is held")
			}
		})
		awaitLine(t, l, "q", i+1)
	}
	counter.reset()
	// Watch the waiting crowd for a second.
	<-time.After(time.Second)
	calls := counter.calls()
	cancel()
	wg.Wait()
	// The head retries on its 2s timer ([1s, 3s)): at most one attempt.
	if calls > 1 {
		t.Fatalf("8 waiting goroutines sent %d scripts in one second, want at most 1", calls)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A holder that re-enters with its token never queues behind its own
// waiters.
func TestReentryDoesNotQueue(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	held := mustObtain(t, l, "r")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = l.Obtain(ctx, "r") // waits until cancelled
	}()
	awaitLine(t, l, "r", 1)
	again, err := l.Obtain(t.Context(), "r", redlock.WithToken(held.Token()), redlock.WithRetry(redlock.NoRetry()))
	if err != nil {
		t.Fatalf("re-entry while a waiter is queued: %v", err)
	}
	cancel()
	<-done
	for _, k := range []*redlock.Lock{again, held} {
		if err := k.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
