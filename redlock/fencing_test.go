package redlock_test

import (
	"context"
	"errors"
	"strings"
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
		lock, err := lockers[i%2].Obtain(t.Context(), "f", redlock.WithRetry(redlock.LinearBackoff(10*time.Millisecond)))
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
	next, err := l.Obtain(t.Context(), "res", redlock.WithRetry(redlock.LinearBackoff(20*time.Millisecond)))
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
	l := newLocker(t, []redis.UniversalClient{counter.Client})
	lock := mustObtain(t, l, "k")
	if lock.Fence() != 0 || counter.calls() != 1 {
		t.Fatalf("without fencing: fence %d, %d script calls; want 0 and 1", lock.Fence(), counter.calls())
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	counter.reset()
	fenced := mustObtain(t, l, "k", redlock.WithFencing())
	if fenced.Fence() == 0 || counter.calls() != 2 {
		t.Fatalf("with fencing: fence %d, %d script calls; want >0 and 2", fenced.Fence(), counter.calls())
	}
	// Re-entry keeps the fence.
	again := mustObtain(t, l, "k", redlock.WithFencing(), redlock.WithToken(fenced.Token()))
	if again.Fence() != fenced.Fence() {
		t.Fatalf("re-entry fence %d, want %d", again.Fence(), fenced.Fence())
	}
}

func TestRestartGuardOptions(t *testing.T) {
	c := newCluster(t, 1)
	if _, err := redlock.New(c.clients, redlock.WithRestartGuard(time.Second), redlock.WithTTL(2*time.Second)); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("TTL above the guard: %v", err)
	}
	if _, err := redlock.New(c.clients, redlock.WithRestartGuard(0)); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("zero guard: %v", err)
	}
	l := newLocker(t, c.clients, redlock.WithRestartGuard(time.Minute))
	if _, err := l.TryObtain(t.Context(), "k", redlock.WithTTL(2*time.Minute)); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "restart guard") {
		t.Fatalf("per-call TTL above the guard: %v", err)
	}
	if _, err := l.TryObtain(t.Context(), "k", redlock.WithRestartGuard(time.Hour)); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("per-call guard: %v", err)
	}
}

func TestRestartGuardFreshClusterAbstainsUntilBootstrap(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithRestartGuard(time.Minute), redlock.WithTTL(10*time.Second))
	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "ABSTAIN") {
		t.Fatalf("fresh guarded cluster: %v, want ErrNoQuorum from abstaining nodes", err)
	}
	// Bootstrap does not end a quarantine already started: the nodes that
	// noticed a loss keep abstaining, and Bootstrap says so.
	if err := l.Bootstrap(t.Context()); !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "abstains") {
		t.Fatalf("Bootstrap of quarantined nodes: %v, want them reported", err)
	}
	if _, err := l.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("after Bootstrap of quarantined nodes: %v", err)
	}
	// A cluster seeded before first use votes at once.
	c2 := newCluster(t, 3)
	l2 := c2.locker(t, redlock.WithRestartGuard(time.Minute), redlock.WithTTL(10*time.Second))
	if err := l2.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	lock := mustObtain(t, l2, "k")
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
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

func TestRestartGuardKeepsSecondClientOut(t *testing.T) {
	maxTTL := time.Second
	_, b, err := restartTwoEmpty(t, redlock.WithRestartGuard(maxTTL))
	if err == nil {
		t.Fatal("with the restart guard a second client got the lock after two of three nodes restarted empty")
	}
	if !errors.Is(err, redlock.ErrNoQuorum) && !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v", err)
	}
	// After the maximum TTL the restarted nodes vote again.
	start := time.Now()
	lock, err := b.Obtain(t.Context(), "k", redlock.WithRetry(redlock.LinearBackoff(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 3*maxTTL {
		t.Fatalf("nodes abstained for %v, want about %v", waited, maxTTL)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestWithoutRestartGuardSecondClientGetsIn(t *testing.T) {
	_, _, err := restartTwoEmpty(t)
	// The known weakness, shown rather than asserted: without the guard the
	// restarted nodes grant a second lock while the first is still held.
	t.Logf("without the guard, second client after two of three nodes restarted empty: err=%v (nil means it got the lock)", err)
}

func TestBootstrapReportsUnreachableNodes(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithNodeTimeout(100*time.Millisecond))
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	err := l.Bootstrap(context.Background())
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNoQuorum) || !errors.As(err, &qe) || qe.Nodes[1].Outcome != redlock.OutcomeError {
		t.Fatalf("Bootstrap with a node down: %v", err)
	}
}

func TestInspectShowsFence(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithFencing())
	lock := mustObtain(t, l, "f")
	st, err := l.Inspect(t.Context(), "f")
	if err != nil {
		t.Fatal(err)
	}
	// The write-back is decided at a majority; the last node may still be
	// on its way.
	// (A node whose grant came after the decision incremented its counter
	// later, past the lock's fence: that only makes later fences larger.)
	with := 0
	for _, n := range st.Nodes {
		if n.Fence >= lock.Fence() {
			with++
		}
	}
	if with < l.Quorum() {
		t.Fatalf("%d nodes show at least the fence %d, want a majority: %+v", with, lock.Fence(), st.Nodes)
	}
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
		next, err := l.Obtain(t.Context(), "f", redlock.WithRetry(redlock.LinearBackoff(50*time.Millisecond)))
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
