package redlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// waitForRelease measures how long after a release a waiter with a retry
// interval of every gets the lock.
func waitForRelease(t *testing.T, every time.Duration, opts ...redlock.LockOption) time.Duration {
	t.Helper()
	c := newCluster(t, 3)
	holderL := c.locker(t)
	held := mustObtain(t, holderL, "q")

	// Every script call whose reply came back is signalled, so the test
	// knows a waiter's attempt is over (and it has subscribed) before it
	// releases.
	calls := make(chan struct{}, 64)
	var spied []*redis.Client
	for _, s := range c.servers {
		w := newWire(t, s)
		w.replies = calls
		spied = append(spied, w.Client)
	}
	waiterL := newLocker(t, spied)
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		lock, err := waiterL.Obtain(t.Context(), "q", append([]redlock.LockOption{redlock.WithRetry(redlock.LinearBackoff(every))}, opts...)...)
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
	// The retry timer would take at least 10s (half its 20s interval).
	if d := waitForRelease(t, 20*time.Second); d > 5*time.Second {
		t.Fatalf("waiter got the lock %v after the release, want well before its timer's 10s", d)
	}
}

func TestWaiterPollingOnlyWaitsForTimer(t *testing.T) {
	// The timer's first wait is at least half the 2s interval.
	if d := waitForRelease(t, 2*time.Second, redlock.WithPollingOnly()); d < 500*time.Millisecond {
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
	if d := time.Since(start); d > 7*time.Second {
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
	// Never released. Attempts again if a loaded machine makes one late.
	if _, err := l.Obtain(t.Context(), "e", redlock.WithTTL(300*time.Millisecond), redlock.WithNodeTimeout(200*time.Millisecond),
		redlock.WithRetry(redlock.LinearBackoff(10*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	lock, err := l.Obtain(t.Context(), "e", redlock.WithRetry(redlock.LinearBackoff(5*time.Second)), redlock.WithPollingOnly())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
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
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("fail-fast took %v", d)
	}
	// Without a deadline short of the holder's TTL it waits as usual.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel2()
	if _, err := l.Obtain(ctx2, "other-key", redlock.WithFailFast()); err != nil {
		t.Fatalf("fail-fast on a free key: %v", err)
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

// A node that grants an attempt only after the attempt has failed (its
// reply came after the other nodes' refusals) had the key free: most likely
// a release on its way. The waiter tries again within two node timeouts, as
// after a split vote, even if no announcement wakes it; it used to sleep
// until the holder's expiry.
func TestLateGrantRetriesSoon(t *testing.T) {
	c := newCluster(t, 3)
	// The holder has the key on nodes 1 and 2 only: node 0 grants every
	// attempt of the waiter, but its replies come when the others have
	// refused.
	mustObtain(t, newLocker(t, c.clients[1:]), "late")
	slow := redistest.ForwardT(t, c.servers[0].Addr)
	slow.SetDelay(300 * time.Millisecond)
	clients := []*redis.Client{slow.ClientT(t), c.clients[1], c.clients[2]}
	answers := make(chan redlock.NodeEvent, 100)
	got := waiter(t, newLocker(t, clients, redlock.WithObserver(nodeAnswers{key: "late", ch: answers})), "late")
	awaitAnswer(t, answers, 0, redlock.OutcomeOK)
	// The holder lets go of node 1, and its announcement is lost.
	if err := c.clients[1].Del(t.Context(), "late").Err(); err != nil {
		t.Fatal(err)
	}
	waiterGotSoon(t, got, time.Now())
}
