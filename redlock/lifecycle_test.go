package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

func TestDoRunsAndReleases(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	var token string
	err := l.Do(t.Context(), "job", func(ctx context.Context) error {
		st, err := l.Inspect(ctx, "job")
		if err != nil {
			return err
		}
		token = st.Holder
		if _, err := l.TryObtain(ctx, "job"); !errors.Is(err, redlock.ErrNotObtained) {
			t.Errorf("inside Do, another TryObtain got %v", err)
		}
		return nil
	})
	if err != nil || token == "" {
		t.Fatalf("Do = %v, holder %q", err, token)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.holders(t, "job", token); n != 0 {
		t.Fatalf("key still on %d nodes after Do", n)
	}
}

func TestDoReturnsFnError(t *testing.T) {
	l := newCluster(t, 1).locker(t)
	boom := errors.New("boom")
	if err := l.Do(t.Context(), "job", func(context.Context) error { return boom }); !errors.Is(err, boom) || errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do = %v, want boom only", err)
	}
	// fn does not run when the lock is busy.
	held := mustObtain(t, l, "busy")
	defer func() { _ = held.Release(context.Background()) }()
	ran := false
	err := l.Do(t.Context(), "busy", func(context.Context) error { ran = true; return nil }, redlock.WithRetry(redlock.NoRetry()))
	if !errors.Is(err, redlock.ErrNotObtained) || ran {
		t.Fatalf("Do on a busy key = %v, ran %v", err, ran)
	}
}

// The background extension keeps the lock for work that runs several TTLs.
func TestDoExtendsPastTTL(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithTTL(600*time.Millisecond), redlock.WithNodeTimeout(100*time.Millisecond))
	err := l.Do(t.Context(), "long", func(ctx context.Context) error {
		// Work for three TTLs on purpose.
		select {
		case <-time.After(1800 * time.Millisecond):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if _, err := l.TryObtain(ctx, "long"); !errors.Is(err, redlock.ErrNotObtained) {
			t.Errorf("after three TTLs another TryObtain got %v: the lock was not extended", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Nodes die while fn runs: its context is cancelled with ErrLockLost as the
// cause within the TTL, and Do says the lock was lost.
func TestDoLosesLockWhenNodesDie(t *testing.T) {
	c := newCluster(t, 3)
	ttl := 600 * time.Millisecond
	l := c.locker(t, redlock.WithTTL(ttl), redlock.WithNodeTimeout(100*time.Millisecond))
	var killedAt time.Time
	var cancelledAfter time.Duration
	err := l.Do(t.Context(), "k", func(ctx context.Context) error {
		for _, s := range c.servers[:2] {
			if err := s.Kill(); err != nil {
				return err
			}
		}
		killedAt = time.Now()
		select {
		case <-ctx.Done():
			cancelledAfter = time.Since(killedAt)
		case <-time.After(10 * ttl):
			t.Error("fn's context was not cancelled after a majority died")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, redlock.ErrLockLost) || !strings.Contains(cause.Error(), "no extension reached a majority in time") {
			t.Errorf("cause = %v, want ErrLockLost saying no extension reached a majority in time", cause)
		}
		return nil
	})
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do = %v, want ErrLockLost", err)
	}
	// Cancellation is due at the lock's deadline, less than a TTL after the
	// nodes died; the margin absorbs timer lateness on a loaded machine (a
	// missed deadline would show as a whole extension period or TTL more).
	if limit := ttl + 150*time.Millisecond; cancelledAfter > limit {
		t.Fatalf("cancelled %v after the nodes died, want within the TTL %v (+ noise margin)", cancelledAfter, ttl)
	}
}

// Another owner takes over (here by force): the next extension sees it.
func TestKeepAliveSeesTakeover(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithTTL(600*time.Millisecond), redlock.WithNodeTimeout(100*time.Millisecond))
	lock := mustObtain(t, l, "k")
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	if err := l.ForceRelease(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	thief := mustObtain(t, l, "k")
	<-held.Done()
	if cause := context.Cause(held); !errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
	if lock.Valid() {
		t.Fatal("lost lock still Valid")
	}
	stop()
	if err := thief.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestKeepAliveStopDoesNotCancelAsLost(t *testing.T) {
	l := newCluster(t, 1).locker(t)
	lock := mustObtain(t, l, "k")
	held, stop := lock.KeepAlive(t.Context())
	stop()
	stop() // twice is fine
	if cause := context.Cause(held); errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("stop cancelled with %v", cause)
	}
	if !lock.Valid() {
		t.Fatal("stop ended the lock")
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseAfterKeepsOthersOut(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "cron")
	hold := 400 * time.Millisecond
	start := time.Now()
	if err := lock.ReleaseAfter(t.Context(), hold); err != nil {
		t.Fatal(err)
	}
	if lock.Valid() {
		t.Fatal("lock valid after ReleaseAfter")
	}
	if _, err := l.TryObtain(t.Context(), "cron"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryObtain during the cooldown: %v", err)
	}
	// A waiter with a slow timer is still let in soon after the hold ends:
	// it sleeps until the holder's keys expire.
	next, err := l.Obtain(t.Context(), "cron", redlock.WithRetry(redlock.LinearBackoff(5*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	got := time.Since(start)
	if got < hold-50*time.Millisecond || got > hold+400*time.Millisecond {
		t.Fatalf("obtained %v after ReleaseAfter(%v), want just after the hold", got, hold)
	}
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := next.ReleaseAfter(t.Context(), -time.Second); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("negative hold: %v", err)
	}
}

func TestReentryCountsHolds(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	first := mustObtain(t, l, "r", redlock.WithMetadata("m"))
	second := mustObtain(t, l, "r", redlock.WithToken(first.Token()))
	if second.Token() != first.Token() {
		t.Fatal("re-entry changed the token")
	}
	st, err := l.Inspect(t.Context(), "r")
	if err != nil || st.Holder != first.Token() || st.Nodes[0].Holds != 2 || st.Nodes[0].Metadata != "m" {
		t.Fatalf("Inspect = %+v, %v; want 2 holds of our token", st, err)
	}
	if _, err := l.TryObtain(t.Context(), "r", redlock.WithToken("someone-else")); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("another token: %v, want ErrNotObtained", err)
	}
	if err := second.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryObtain(t.Context(), "r"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("after one of two releases the key must stay held, got %v", err)
	}
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	free := mustObtain(t, l, "r")
	if err := free.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// waitForRelease measures how long after a release a waiter with a
// 2-second retry interval gets the lock.
func waitForRelease(t *testing.T, opts ...redlock.Option) time.Duration {
	t.Helper()
	c := newCluster(t, 3)
	holderL := c.locker(t)
	held := mustObtain(t, holderL, "q")

	// Every script call whose reply came back is signalled, so the test
	// knows a waiter's attempt is over (and it has subscribed) before it
	// releases.
	calls := make(chan struct{}, 64)
	var spied []redis.UniversalClient
	for _, s := range c.servers {
		w := newWire(t, s)
		w.replies = calls
		spied = append(spied, w.Client)
	}
	waiterL := newLocker(t, spied)
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		lock, err := waiterL.Obtain(t.Context(), "q", append([]redlock.Option{redlock.WithRetry(redlock.LinearBackoff(2 * time.Second))}, opts...)...)
		got <- time.Now()
		if err == nil {
			err = lock.Release(context.Background())
		}
		errc <- err
	}()
	// The first attempt on all three nodes, then (with notifications) the
	// retry after subscribing; with polling only, the next is the timer's.
	attempts := 2
	if len(opts) > 0 { // polling only
		attempts = 1
	}
	for range 3 * attempts {
		<-calls
	}
	released := time.Now()
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	at := <-got
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return at.Sub(released)
}

func TestWaiterWakesOnRelease(t *testing.T) {
	if d := waitForRelease(t); d > 100*time.Millisecond {
		t.Fatalf("waiter got the lock %v after the release, want within 100ms", d)
	}
}

func TestWaiterPollingOnlyWaitsForTimer(t *testing.T) {
	// The timer's first wait is at least half the 2s interval.
	if d := waitForRelease(t, redlock.WithPollingOnly()); d < 500*time.Millisecond {
		t.Fatalf("polling-only waiter got the lock %v after the release: it was woken", d)
	}
}

// Many waiters share one subscription per node; each release wakes them and
// one gets the lock, until every waiter has had its turn.
func TestManyWaitersShareSubscriptions(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	held := mustObtain(t, l, "q")
	const waiters = 6
	var got atomic.Int32
	errc := make(chan error, waiters)
	for range waiters {
		go func() {
			lock, err := l.Obtain(t.Context(), "q", redlock.WithRetry(redlock.LinearBackoff(10*time.Second)))
			if err == nil {
				got.Add(1)
				err = lock.Release(context.Background())
			}
			errc <- err
		}()
	}
	start := time.Now()
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range waiters {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	// With a 10s timer only notifications can make this fast.
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("%d waiters took %v: they were not woken by releases", waiters, d)
	}
	n, err := c.clients[0].PubSubNumSub(t.Context(), "redlock:released:q").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n["redlock:released:q"] != 0 {
		t.Fatalf("%d subscriptions left after every waiter finished", n["redlock:released:q"])
	}
}

func TestWaiterNeverSleepsPastExpiry(t *testing.T) {
	l := newCluster(t, 3).locker(t)
	mustObtain(t, l, "e", redlock.WithTTL(300*time.Millisecond), redlock.WithNodeTimeout(100*time.Millisecond)) // never released
	start := time.Now()
	lock, err := l.Obtain(t.Context(), "e", redlock.WithRetry(redlock.LinearBackoff(5*time.Second)), redlock.WithPollingOnly())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("waited %v for a 300ms lock to expire", d)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestFailFast(t *testing.T) {
	l := newCluster(t, 3).locker(t)
	held := mustObtain(t, l, "f") // 10s TTL
	defer func() { _ = held.Release(context.Background()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := l.Obtain(ctx, "f", redlock.WithFailFast())
	if !errors.Is(err, redlock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrNotObtained without waiting for the deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("fail-fast took %v", d)
	}
	// Without a deadline short of the holder's TTL it waits as usual.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel2()
	if _, err := l.Obtain(ctx2, "other-key", redlock.WithFailFast()); err != nil {
		t.Fatalf("fail-fast on a free key: %v", err)
	}
}

func TestInspect(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "i", redlock.WithMetadata("host=a"))
	if err := c.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	st, err := l.Inspect(t.Context(), "i")
	if err != nil {
		t.Fatal(err)
	}
	if st.Key != "i" || st.Holder != lock.Token() || len(st.Nodes) != 3 {
		t.Fatalf("Status = %+v", st)
	}
	for i, n := range st.Nodes[:2] {
		if n.Addr != c.servers[i].Addr || !n.Held || n.Token != lock.Token() || n.Metadata != "host=a" || n.Holds != 1 || n.TTL <= 0 || n.Err != nil {
			t.Fatalf("node %d = %+v", i, n)
		}
	}
	if n := st.Nodes[2]; n.Err == nil || n.Held {
		t.Fatalf("dead node = %+v, want its error", n)
	}
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inspect(t.Context(), "i"); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Inspect with a majority down: %v", err)
	}
	if _, err := l.Inspect(t.Context(), ""); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("empty key: %v", err)
	}
}

func TestForceRelease(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	stuck := mustObtain(t, l, "s")
	if err := l.ForceRelease(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	if n := c.holders(t, "s", stuck.Token()); n != 0 {
		t.Fatalf("key on %d nodes after ForceRelease", n)
	}
	if err := stuck.Extend(t.Context(), 5*time.Second); !errors.Is(err, redlock.ErrLockExpired) {
		t.Fatalf("owner's Extend after ForceRelease: %v", err)
	}
	for _, s := range c.servers[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ForceRelease(t.Context(), "s"); !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "force-release") {
		t.Fatalf("ForceRelease with a majority down: %v", err)
	}
}

// Releasing while KeepAlive still runs ends it quietly: no false loss.
func TestKeepAliveAfterReleaseIsNotLoss(t *testing.T) {
	l := newCluster(t, 1).locker(t, redlock.WithTTL(300*time.Millisecond), redlock.WithNodeTimeout(100*time.Millisecond))
	lock := mustObtain(t, l, "k")
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Let extension ticks pass (every TTL/3 = 100ms) and the old
	// deadline too.
	select {
	case <-held.Done():
		t.Fatalf("KeepAlive reported %v after a plain Release", context.Cause(held))
	case <-time.After(600 * time.Millisecond):
	}
}

// A waiter whose failed attempts win a minority of nodes must not wake
// itself with the undo of those attempts: it keeps to its timer.
func TestFailedAttemptUndoWakesNobody(t *testing.T) {
	c := newCluster(t, 3)
	// The holder has the key on nodes 0 and 1 only; node 2 is free, so
	// every attempt of the waiter wins node 2 and must undo it.
	holder := newLocker(t, c.clients[:2])
	held := mustObtain(t, holder, "k")
	var calls atomic.Int64
	counted := countedClients(t, c.servers, &calls)
	waiter := newLocker(t, counted)
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := waiter.Obtain(ctx, "k", redlock.WithRetry(redlock.LinearBackoff(100*time.Millisecond))); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v", err)
	}
	// About 5 rounds of 3 acquires plus 1 undo in 500ms; a self-waking
	// waiter sends hundreds.
	if n := calls.Load(); n > 60 {
		t.Fatalf("the waiter sent %d scripts in 500ms: it woke itself", n)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
