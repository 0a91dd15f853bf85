package redlock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// fencedStore is the protected resource of the fencing tests and example:
// it keeps the highest fence it has seen and rejects writes with older ones.
type fencedStore struct {
	mu      sync.Mutex
	highest uint64
	value   string
}

var errStaleFence = errors.New("stale fencing token")

func (s *fencedStore) Write(fence uint64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence <= s.highest {
		return errStaleFence
	}
	s.highest, s.value = fence, value
	return nil
}

func TestFencesGrowAcrossLockers(t *testing.T) {
	c := newCluster(t, 3)
	lockers := []*redlock.Locker{c.locker(t, redlock.WithFencing()), c.locker(t, redlock.WithFencing())}
	var last uint64
	for i := range 20 {
		lock := mustObtain(t, lockers[i%2], "f")
		if lock.Fence() <= last {
			t.Fatalf("hold %d got fence %d after %d", i, lock.Fence(), last)
		}
		last = lock.Fence()
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFencesGrowAcrossMinorityRestarts(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{Persistent: true})
	clients := redistest.ClientsT(t, servers)
	lockers := []*redlock.Locker{newLocker(t, clients, redlock.WithFencing()), newLocker(t, clients, redlock.WithFencing())}
	var last uint64
	for i := range 12 {
		// Restart one node (a minority) before every other hold.
		if i%2 == 1 {
			if err := servers[i%3].Restart(); err != nil {
				t.Fatal(err)
			}
		}
		lock, err := lockers[i%2].Obtain(redistest.BoundedCtx(t), "f", redlock.WithRetry(redlock.LinearBackoff(10*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		if lock.Fence() <= last {
			t.Fatalf("hold %d got fence %d after %d", i, lock.Fence(), last)
		}
		last = lock.Fence()
		if err := lock.Release(t.Context()); err != nil && !errors.Is(err, redlock.ErrNoQuorum) {
			t.Fatal(err)
		}
	}
}

// A holder that pauses past its validity writes with a fence older than the
// next holder's: the store rejects it.
func TestFencedStoreRejectsPausedHolder(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithFencing(), redlock.WithTTL(400*time.Millisecond), redlock.WithNodeTimeout(100*time.Millisecond))
	store := &fencedStore{}
	slow := mustObtain(t, l, "res")
	// slow pauses: its lock expires and another client takes it.
	next, err := l.Obtain(redistest.BoundedCtx(t), "res", redlock.WithRetry(redlock.LinearBackoff(20*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Write(next.Fence(), "next"); err != nil {
		t.Fatal(err)
	}
	if err := store.Write(slow.Fence(), "stale"); !errors.Is(err, errStaleFence) {
		t.Fatalf("stale write: %v, want rejected", err)
	}
	if store.value != "next" {
		t.Fatalf("store holds %q", store.value)
	}
}

func TestFencingOffCostsNoRoundTrip(t *testing.T) {
	c := newCluster(t, 1)
	counter := newWire(t, c.servers[0])
	l := newLocker(t, []*redis.Client{counter.Client})
	lock := mustObtain(t, l, "k")
	if lock.Fence() != 0 || counter.calls() != 1 {
		t.Fatalf("without fencing: fence %d, %d script calls; want 0 and 1", lock.Fence(), counter.calls())
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	counter.reset()
	// A single node's counter is the fence itself: nothing to write back.
	fenced := mustObtain(t, l, "k", redlock.WithFencing())
	if fenced.Fence() == 0 || counter.calls() != 1 {
		t.Fatalf("with fencing: fence %d, %d script calls; want >0 and 1", fenced.Fence(), counter.calls())
	}
	// Re-entry keeps the fence.
	again := mustObtain(t, l, "k", redlock.WithFencing(), redlock.WithToken(fenced.Token()))
	if again.Fence() != fenced.Fence() {
		t.Fatalf("re-entry fence %d, want %d", again.Fence(), fenced.Fence())
	}
}

// restartTwoEmpty runs the known Redlock weakness: A holds a lock on three
// nodes, two of them restart without persistence, B tries to take the lock.
// It returns B's error (nil when B got in).
func restartTwoEmpty(t *testing.T, opts ...redlock.Option) (*cluster, *redlock.Locker, error) {
	t.Helper()
	c := newCluster(t, 3)
	// A node timeout that a loaded machine meets at first contact (the
	// connection's set-up round trip) while the TTL stays short.
	opts = append([]redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(300 * time.Millisecond)}, opts...)
	a := c.locker(t, opts...)
	b := c.locker(t, opts...)
	if err := a.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustObtain(t, a, "k")
	for _, s := range c.servers[:2] {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.TryObtain(t.Context(), "k")
	return c, b, err
}

// With the restart guard, fences keep growing even when a majority of
// nodes restarts without persistence and forgets its counters: a counter
// starts again from the server's clock, and the guard keeps the node out
// until every fence it handed out is in the past.
func TestFencesGrowAcrossMajorityRestartWithGuard(t *testing.T) {
	c := newCluster(t, 3)
	opts := []redlock.Option{redlock.WithFencing(), redlock.WithRestartGuard(time.Second), redlock.WithTTL(time.Second), redlock.WithNodeTimeout(300 * time.Millisecond)}
	l := c.locker(t, opts...)
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for round := range 2 {
		lock := mustObtain(t, l, "f")
		if lock.Fence() <= last {
			t.Fatalf("round %d: fence %d after %d", round, lock.Fence(), last)
		}
		last = lock.Fence()
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, s := range c.servers[:2] {
			if err := s.Restart(); err != nil { // empty: no persistence
				t.Fatal(err)
			}
		}
		// The restarted nodes abstain for a second; wait for them.
		next, err := l.Obtain(redistest.BoundedCtx(t), "f", redlock.WithRetry(redlock.LinearBackoff(50*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		if next.Fence() <= last {
			t.Fatalf("round %d: fence went from %d to %d across the restart of a majority", round, last, next.Fence())
		}
		last = next.Fence()
		if err := next.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
