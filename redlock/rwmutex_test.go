package redlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// Readers share; a writer excludes readers and writers; the writer holds
// the key name itself, so a plain lock on it is excluded too.
func TestRWMutexReadersShareWriterExcludes(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	rw := l.RWMutex("doc")
	r1, r2 := mustRLock(t, rw), mustRLock(t, rw)
	if r1.Key() == r2.Key() || !strings.HasPrefix(r1.Key(), "redlock:rw:doc:r:") {
		t.Fatalf("leases on %q and %q", r1.Key(), r2.Key())
	}
	if _, err := rw.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotObtained) || errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("TryLock beside two readers: %v; want ErrNotObtained", err)
	}
	for _, r := range []*redlock.Lock{r1, r2} {
		if err := r.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	w, err := rw.TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock after the readers left: %v", err)
	}
	if w.Key() != "doc" {
		t.Fatalf("writer on %q, want the key doc", w.Key())
	}
	if _, err := rw.TryRLock(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryRLock beside the writer: %v; want ErrNotObtained", err)
	}
	if _, err := rw.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("a second writer: %v; want ErrNotObtained", err)
	}
	if _, err := l.TryObtain(t.Context(), "doc"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("a plain lock on the writer key: %v; want ErrNotObtained", err)
	}
	if err := w.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustRLock(t, rw)
}

func mustRLock(t *testing.T, rw *redlock.RWMutex, opts ...redlock.LockOption) *redlock.Lock {
	t.Helper()
	return mustTake(t, "TryRLock", rw.TryRLock, opts...)
}

// mustTake makes one attempt with try, named what, and fails the test
// unless it got the lock.
func mustTake(t *testing.T, what string, try func(context.Context, ...redlock.LockOption) (*redlock.Lock, error), opts ...redlock.LockOption) *redlock.Lock {
	t.Helper()
	lock, err := try(t.Context(), opts...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return lock
}

// Readers and writers on two Lockers, while a random minority of the five
// nodes is paused and resumed: never a reader beside a writer, never two
// writers, and writers' fences grow in the order they held the lock.
func TestRWMutexExclusionUnderPauses(t *testing.T) {
	// A short TTL: a lease whose release failed (a majority paused) keeps
	// writers out until it expires.
	lockers, ctx, stop := underPauses(t)
	var (
		mu               sync.Mutex
		readers, writers int
		lastFence        uint64
		reads, writes    atomic.Int32
		wg               sync.WaitGroup
	)
	enter := func(write bool, fence uint64) {
		mu.Lock()
		defer mu.Unlock()
		if write {
			writers++
			if fence <= lastFence {
				t.Errorf("writer's fence %d after %d", fence, lastFence)
			}
			lastFence = fence
		} else {
			readers++
		}
		if writers > 1 || (writers == 1 && readers > 0) {
			t.Errorf("%d writers and %d readers at once", writers, readers)
		}
	}
	leave := func(write bool) {
		mu.Lock()
		defer mu.Unlock()
		if write {
			writers--
		} else {
			readers--
		}
	}
	for w := range 8 {
		rw := lockers[w%2].RWMutex("shared")
		write := w%4 == 0
		wg.Go(func() {
			for ctx.Err() == nil {
				var lock *redlock.Lock
				var err error
				if write {
					lock, err = rw.Lock(ctx, semRetry, redlock.WithFencing())
				} else {
					lock, err = rw.RLock(ctx, semRetry)
				}
				if err != nil {
					continue // an outage or the end: the pauses cause both
				}
				enter(write, lock.Fence())
				time.Sleep(time.Duration(1+rand.IntN(3)) * time.Millisecond)
				leave(write)
				if write {
					writes.Add(1)
				} else {
					reads.Add(1)
				}
				// A failed release leaves the lease to its TTL: safe.
				_ = lock.Release(context.Background())
			}
		})
	}
	wg.Wait()
	stop()
	t.Logf("%d reads and %d writes", reads.Load(), writes.Load())
	if reads.Load() == 0 || writes.Load() == 0 {
		t.Fatalf("%d reads and %d writes: the test tested nothing", reads.Load(), writes.Load())
	}
}

// underPauses starts five servers and two Lockers over them (node timeout
// 150ms, TTL 1s), and pauses random minorities of two nodes at most until
// ctx, which it returns, ends 8s later; stop waits for the pauses to end
// and resumes every node.
func underPauses(t *testing.T) (lockers []*redlock.Locker, ctx context.Context, stop func()) {
	t.Helper()
	c := newCluster(t, 5)
	opts := []redlock.Option{redlock.WithNodeTimeout(150 * time.Millisecond), redlock.WithTTL(time.Second)}
	lockers = []*redlock.Locker{c.locker(t, opts...), c.locker(t, opts...)}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	t.Cleanup(cancel)
	return lockers, ctx, c.pauseMinorities(t, ctx, 2)
}

// pauseMinorities pauses a random minority (at most most nodes) for 50 to
// 300 ms at a time, until ctx ends; stop waits for it and resumes all.
func (c *cluster) pauseMinorities(t *testing.T, ctx context.Context, most int) (stop func()) {
	t.Helper()
	seed := time.Now().UnixNano()
	t.Logf("pause seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			picked := rng.Perm(len(c.servers))[:1+rng.IntN(most)]
			for _, i := range picked {
				if err := c.servers[i].Pause(); err != nil {
					t.Error(err)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(50+rng.IntN(250)) * time.Millisecond):
			}
			for _, i := range picked {
				if err := c.servers[i].Resume(); err != nil {
					t.Error(err)
				}
			}
		}
	}()
	return func() { <-done }
}

// A writer waiting behind readers that overlap without end gets in within
// a few of their hold times: its mark keeps new readers out.
func TestRWMutexWriterNotStarved(t *testing.T) {
	c := newCluster(t, 3)
	readers, writer := c.locker(t), c.locker(t)
	const hold = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var reads atomic.Int32
	for r := range 4 {
		wg.Go(func() {
			// Staggered: some reader always holds.
			time.Sleep(time.Duration(r) * hold / 4)
			rw := readers.RWMutex("busy")
			for ctx.Err() == nil {
				lock, err := rw.RLock(ctx, semRetry)
				if err != nil {
					continue
				}
				reads.Add(1)
				time.Sleep(hold)
				if err := lock.Release(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	// Wait until the stream of readers runs.
	if !poll(t, 10*time.Second, func() bool { return reads.Load() >= 4 }) {
		t.Fatal("the readers did not start")
	}
	start := time.Now()
	w, err := writer.RWMutex("busy").Lock(ctx, semRetry)
	waited := time.Since(start)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("writer: %v after %v", err, waited)
	}
	if err := w.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Every reader that held when the writer came leaves within one hold.
	if waited > 10*hold {
		t.Fatalf("writer waited %v behind readers holding %v each", waited, hold)
	}
	t.Logf("writer waited %v behind readers holding %v each", waited, hold)
}

// A single attempt that fails keeps no reader out.
func TestRWMutexTryLockLeavesNoMark(t *testing.T) {
	c := newCluster(t, 3)
	rw := c.locker(t).RWMutex("try")
	mustRLock(t, rw)
	if _, err := rw.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryLock beside a reader: %v", err)
	}
	mustRLock(t, rw)
}

// A reader that dies is gone at its own TTL while another reader extends
// its own lease; releasing a reader touches no other.
func TestRWMutexLeasesAreTheirOwn(t *testing.T) {
	c := newCluster(t, 3)
	rw := c.locker(t, redlock.WithNodeTimeout(200*time.Millisecond)).RWMutex("leases")
	dead := mustRLock(t, rw, redlock.WithTTL(2*time.Second))
	if n := c.holders(t, dead.Key(), dead.Token()); n < 2 {
		t.Fatalf("the reader's lease on %d nodes", n)
	}
	alive := mustRLock(t, rw, redlock.WithTTL(2*time.Second))
	third := mustRLock(t, rw, redlock.WithTTL(10*time.Second))
	if err := third.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The live reader extends for twice the dead one's TTL.
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		if err := alive.Extend(t.Context(), 2*time.Second); err != nil {
			t.Fatalf("extending the live reader: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !c.emptiedWithin(t, time.Second, dead.Key()) {
		t.Fatalf("the dead reader's lease outlived its TTL by 2s: %q", c.values(t, dead.Key()))
	}
	c.heldEverywhere(t, alive.Key(), alive.Token())
	if _, err := rw.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryLock beside the live reader: %v", err)
	}
	if err := alive.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	w, err := rw.TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock after every reader left: %v", err)
	}
	if err := w.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Nothing the lock wrote lives on.
	if !c.emptied(t, "redlock:rw:leases:readers", "redlock:rw:leases:wait", "leases") {
		t.Fatalf("keys left: index %q, mark %q", c.values(t, "redlock:rw:leases:readers"), c.values(t, "redlock:rw:leases:wait"))
	}
}

// A reader's fence is above every earlier writer's and below every later
// writer's.
func TestRWMutexFences(t *testing.T) {
	c := newCluster(t, 3)
	rw := c.locker(t).RWMutex("fenced")
	var fences []uint64
	for i := range 20 {
		var lock *redlock.Lock
		var err error
		if i%2 == 0 {
			lock, err = rw.TryLock(t.Context(), redlock.WithFencing())
		} else {
			lock, err = rw.TryRLock(t.Context(), redlock.WithFencing())
		}
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, lock.Fence())
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fences of writers and readers in turn: %d", fences)
		}
	}
}

// A reader's lock-delay (its lease outlives a lost reader) and a
// reader's ReleaseAfter keep the writer out; the writer's keep readers out.
func TestRWMutexLockDelay(t *testing.T) {
	c := newCluster(t, 3)
	rw := c.locker(t, redlock.WithNodeTimeout(200*time.Millisecond)).RWMutex("delay")
	const ttl, delay = time.Second, 2 * time.Second
	lost := mustRLock(t, rw, redlock.WithTTL(ttl), redlock.WithLockDelay(delay))
	// The reader is lost: never released, never extended.
	start := time.Now()
	w, err := rw.Lock(redistest.BoundedCtx(t), semRetry)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < ttl+delay/2 {
		t.Fatalf("writer in %v beside a lost reader of TTL %v and lock-delay %v", d, ttl, delay)
	}
	_ = lost
	if err := w.ReleaseAfter(t.Context(), delay); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.TryRLock(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryRLock within the writer's cooldown: %v", err)
	}
	r, err := rw.RLock(redistest.BoundedCtx(t), semRetry)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ReleaseAfter(t.Context(), delay); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.TryLock(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryLock within a reader's cooldown: %v", err)
	}
}

// Bad names and options are ErrInvalid; contention and outage are told
// apart; a single node and the restart guard run the same code.
func TestRWMutexInvalidOutageSingleNode(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	for _, name := range []string{"", "redlock:x"} {
		if _, err := l.RWMutex(name).TryRLock(t.Context()); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("RWMutex(%q).TryRLock: %v; want ErrInvalid", name, err)
		}
		if _, err := l.RWMutex(name).TryLock(t.Context()); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("RWMutex(%q).TryLock: %v; want ErrInvalid", name, err)
		}
	}
	if _, err := l.RWMutex("ok").TryRLock(t.Context(), redlock.WithToken("t")); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("TryRLock WithToken: %v; want ErrInvalid", err)
	}

	guarded := c.bootstrapped(t)
	g := mustRLock(t, guarded.RWMutex("guarded"))
	if err := g.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := guarded.RWMutex("guarded").TryLock(t.Context()); err != nil {
		t.Fatalf("guarded TryLock: %v", err)
	}

	one := newLocker(t, c.clients[2:])
	r := mustRLock(t, one.RWMutex("single"))
	if _, err := one.RWMutex("single").TryLock(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("single node, TryLock beside a reader: %v", err)
	}
	if err := r.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

	if err := c.servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	short := c.locker(t, redlock.WithNodeTimeout(200*time.Millisecond)).RWMutex("down")
	if _, err := short.TryRLock(t.Context()); !errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("two nodes of three down, TryRLock: %v; want ErrNoQuorum", err)
	}
	if _, err := short.TryLock(t.Context()); !errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("two nodes of three down, TryLock: %v; want ErrNoQuorum", err)
	}
}

// As sync.RWMutex: Lock by the holder of a reader's lease waits for that
// lease (until its context ends), and meanwhile keeps new readers out; a
// recursive RLock behind that waiting writer waits too. Neither is an
// error: the docs say so.
func TestRWMutexUpgradeWaitsAsSyncRWMutex(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	m := l.RWMutex("upgrade")
	reader := mustTake(t, "TryRLock", m.TryRLock)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	writerDone := make(chan error, 1)
	go func() {
		_, err := m.Lock(ctx)
		writerDone <- err
	}()
	// The waiting writer's mark keeps a second reader out.
	if !poll(t, 10*time.Second, func() bool { return c.value(t, 0, "redlock:rw:upgrade:wait") != "" }) {
		t.Fatal("the waiting writer set no mark")
	}
	if _, err := m.TryRLock(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("RLock behind a waiting writer: %v; want ErrNotObtained", err)
	}
	if err := <-writerDone; !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Lock by a reader of the same lock: %v; want it to wait until its context ends", err)
	}
	if !reader.Valid() {
		t.Fatal("the reader's lease was lost")
	}
	if err := reader.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
