package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

// awaitOffer waits until the head of key's line offers itself for a handoff.
func awaitOffer(t *testing.T, l *redlock.Locker, key string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !redlock.Offered(l, key) {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("nobody waiting for %q offered itself for a handoff", key)
		}
	}
}

// slowRetry keeps a waiter from retrying on its own for the whole test: only
// a handoff or a notification can give it the lock quickly.
var slowRetry = redlock.WithRetry(redlock.LinearBackoff(30 * time.Second))

type obtained struct {
	lock *redlock.Lock
	err  error
	at   time.Time
}

func obtainAsync(ctx context.Context, l *redlock.Locker, key string, opts ...redlock.LockOption) <-chan obtained {
	ch := make(chan obtained, 1)
	go func() {
		lock, err := l.Obtain(ctx, key, opts...)
		ch <- obtained{lock, err, time.Now()}
	}()
	return ch
}

// A release with a waiter of the same Locker in line hands the lock over in
// one script per node: the waiter's token, TTL and metadata replace the
// holder's on every node, without the key being free in between.
func TestReleaseHandsOffToLocalWaiter(t *testing.T) {
	c := newCluster(t, 1)
	counter := newWire(t, c.servers[0])
	l := newLocker(t, []*redis.Client{counter.Client})
	held := mustObtain(t, l, "h")
	got := obtainAsync(t.Context(), l, "h", slowRetry, redlock.WithTTL(3*time.Second), redlock.WithMetadata("next"))
	awaitOffer(t, l, "h")
	counter.reset()
	released := time.Now()
	if err := held.Release(t.Context()); err != nil {
		t.Fatalf("Release with a handoff: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if d := r.at.Sub(released); d > time.Second {
		t.Fatalf("waiter got the lock %v after the release", d)
	}
	if n := counter.calls(); n != 1 {
		t.Fatalf("the handoff sent %d scripts, want 1 (release and acquisition in one)", n)
	}
	v := c.value(t, 0, "h")
	if !strings.HasPrefix(v, r.lock.Token()+"\x00") || !strings.HasSuffix(v, "\x00next") {
		t.Fatalf("value after the handoff = %q, want the new owner's token and metadata", v)
	}
	pttl, err := c.clients[0].PTTL(t.Context(), "h").Result()
	if err != nil || pttl <= 0 || pttl > 3*time.Second {
		t.Fatalf("PTTL after the handoff = %v, %v; want the new owner's 3s TTL", pttl, err)
	}
	if held.Valid() || !r.lock.Valid() {
		t.Fatalf("after the handoff: old owner valid %v, new owner valid %v", held.Valid(), r.lock.Valid())
	}
	if err := r.lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v := c.value(t, 0, "h"); v != "" {
		t.Fatalf("key left behind: %q", v)
	}
}

// Across three nodes, a handoff gives the waiter the lock on every node and
// leaves nothing of the old owner.
func TestHandoffOnQuorum(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	held := mustObtain(t, l, "q")
	got := obtainAsync(t.Context(), l, "q", slowRetry)
	awaitOffer(t, l, "q")
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	// Release returns at a majority; the third node has the same call
	// queued. A TTL round waits for every node.
	if _, err := r.lock.TTL(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := c.holders(t, "q", r.lock.Token()); n != 3 {
		t.Fatalf("new owner holds %d of 3 nodes, want 3: %q old %q new %q", n, c.values(t, "q"), held.Token(), r.lock.Token())
	}
	if n := c.holders(t, "q", held.Token()); n != 0 {
		t.Fatalf("old owner still holds %d nodes", n)
	}
	if err := r.lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A release that only gives up one of several holds (re-entry) cannot hand
// the lock over: the waiter keeps waiting, and gets it from the last release.
func TestHandoffWaitsForLastHold(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	first := mustObtain(t, l, "re")
	second := mustObtain(t, l, "re", redlock.WithToken(first.Token()))
	got := obtainAsync(t.Context(), l, "re", slowRetry)
	awaitOffer(t, l, "re")
	if err := second.Release(t.Context()); err != nil {
		t.Fatalf("releasing one of two holds: %v", err)
	}
	// The failed handoff sends the waiter back to its line: it tries once
	// (the key is still held) and offers itself again.
	awaitOffer(t, l, "re")
	select {
	case r := <-got:
		t.Fatalf("waiter got the lock (%v) while a hold remained", r.err)
	default:
	}
	if n := c.holders(t, "re", first.Token()); n < 2 {
		t.Fatalf("the remaining hold is on %d nodes, want a majority", n)
	}
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := r.lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Handing over to a fencing waiter gives it a fence above the old owner's,
// and the fences keep growing along a chain of handoffs.
func TestHandoffFencesGrow(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithFencing())
	var (
		mu    sync.Mutex
		last  uint64
		count int
		wg    sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for range 10 {
				lock, err := l.Obtain(t.Context(), "f")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if lock.Fence() <= last {
					t.Errorf("fence %d after %d", lock.Fence(), last)
				}
				last = lock.Fence()
				count++
				mu.Unlock()
				if err := lock.Release(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if count != 40 {
		t.Fatalf("%d acquisitions, want 40", count)
	}
}

// A Locker whose goroutines want a key all the time still lets a waiter of
// another Locker in: after a few handoffs it releases the key for everyone.
func TestHandoffStreakLetsOthersIn(t *testing.T) {
	c := newCluster(t, 3)
	busy, other := c.locker(t), c.locker(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				lock, err := busy.Obtain(ctx, "busy")
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				if err := lock.Release(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	lock, err := other.Obtain(wctx, "busy")
	if err != nil {
		t.Fatalf("the other Locker never got the key: %v", err)
	}
	if err := lock.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// handOver leaves l's lock on key with a goroutine that got it from the
// line (by a handoff), while another goroutine, with opts and its context
// marked nextInLine, waits in line behind it; it returns that lock and what
// the waiter will get. The waiter may not have offered itself for the next
// handoff yet (see awaitOffer).
func handOver(t *testing.T, l *redlock.Locker, key string, opts ...redlock.LockOption) (*redlock.Lock, <-chan obtained) {
	t.Helper()
	first := mustObtain(t, l, key)
	got := obtainAsync(t.Context(), l, key, slowRetry)
	awaitOffer(t, l, key)
	next := obtainAsync(context.WithValue(t.Context(), nextInLine{}, true), l, key, append([]redlock.LockOption{slowRetry}, opts...)...)
	awaitLine(t, l, key, 2)
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.lock, next
}

// nextInLine marks the context of the waiter that handOver leaves in line.
type nextInLine struct{}

// askedByNext counts the node answers to attempts of the waiter that
// handOver leaves in line.
type askedByNext struct {
	redlock.NopObserver
	n *atomic.Int64
}

func (o askedByNext) NodeDone(ctx context.Context, e redlock.NodeEvent) {
	if e.Op == redlock.OpObtain && ctx.Value(nextInLine{}) != nil {
		o.n.Add(1)
	}
}

// While a goroutine of the Locker holds the key it got from the line, the
// next in line does not ask the nodes at all; a release with a cooldown
// wakes it to find out how long the key stays taken, instead of leaving it
// asleep until the old holder's validity ends. (The waits are told apart by
// their contexts, not by the scripts on the wire: the first waiter tries
// once more when its subscription is confirmed, and that try may come
// after the handoff has begun.)
func TestLineWaitsQuietlyBehindLocalHolder(t *testing.T) {
	var asked atomic.Int64
	l := newCluster(t, 1).locker(t, redlock.WithObserver(askedByNext{n: &asked}))
	holder, got := handOver(t, l, "quiet")
	awaitOffer(t, l, "quiet")
	if n := asked.Load(); n != 0 {
		t.Fatalf("the next in line asked the nodes %d times while a goroutine of its Locker held the key, want never", n)
	}
	const cooldown = 200 * time.Millisecond
	released := time.Now()
	if err := holder.ReleaseAfter(t.Context(), cooldown); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The TTL is 10s and the retry interval 30s: only the wake-up after
	// the release, then a retry at the end of the cooldown, fit in 5s.
	if d := r.at.Sub(released); d < cooldown || d > 5*time.Second {
		t.Fatalf("waiter got the lock %v after a release with a %v cooldown", d, cooldown)
	}
	if err := r.lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Closing the Locker ends a wait behind a local holder at once.
func TestCloseEndsWaitBehindLocalHolder(t *testing.T) {
	c := newCluster(t, 1)
	l, err := redlock.New(c.clients, testOpts...)
	if err != nil {
		t.Fatal(err)
	}
	holder, got := handOver(t, l, "closing")
	awaitOffer(t, l, "closing")
	closed := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if !errors.Is(r.err, redlock.ErrClosed) {
		t.Fatalf("waiter after Close: %v, want ErrClosed", r.err)
	}
	if d := r.at.Sub(closed); d > 5*time.Second {
		t.Fatalf("waiter returned %v after Close", d)
	}
	if !errors.Is(holder.Release(t.Context()), redlock.ErrClosed) {
		t.Fatal("Release after Close did not fail with ErrClosed")
	}
}

// An Obtain that ends while it waits behind its own Locker's holder, asking
// no node, says so, and still matches ErrNotObtained and the context's
// error.
func TestObtainEndsBehindLocalHolder(t *testing.T) {
	l := newCluster(t, 1).locker(t)
	first := mustObtain(t, l, "ends")
	got := obtainAsync(t.Context(), l, "ends", slowRetry)
	awaitOffer(t, l, "ends")
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	ended := obtainAsync(ctx, l, "ends", slowRetry)
	awaitLine(t, l, "ends", 2)
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The second waiter is now first in line, behind the new holder.
	awaitOffer(t, l, "ends")
	e := <-ended
	if !errors.Is(e.err, redlock.ErrNotObtained) || !errors.Is(e.err, context.DeadlineExceeded) {
		t.Fatalf("Obtain ended behind a local holder: %v; want ErrNotObtained and DeadlineExceeded", e.err)
	}
	if !strings.Contains(e.err.Error(), `"ends"`) {
		t.Fatalf("error %q does not name the key", e.err)
	}
	if err := r.lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The next in line, asleep behind a lock that a goroutine of its Locker got
// from the line, is woken when that lock is let go, even when it is let go
// just before the waiter offers itself for a handoff: the release's poke
// then finds no offer, and the waiter must see that the lock went. It used
// to sleep until the lock's validity ended (here 10s; with release
// notifications on, the notification usually woke it, unless it came just
// before the waiter looked at the line: an ObtainMulti waiter once slept
// past its test's deadline that way).
func TestLetGoJustBeforeOfferWakesNext(t *testing.T) {
	l := newCluster(t, 1).locker(t)
	lockA := make(chan *redlock.Lock, 1)
	var once sync.Once
	defer redlock.BeforeOffer(func(ctx context.Context) {
		if ctx.Value(nextInLine{}) == nil {
			return
		}
		once.Do(func() {
			if err := (<-lockA).Release(context.Background()); err != nil {
				t.Error(err)
			}
		})
	})()
	// A gets the lock from the line; B, next in line, polls only: no
	// release notification wakes it, only the poke. B finds A's lock held
	// and A lets it go just before B offers itself.
	a, gotB := handOver(t, l, "k", redlock.WithPollingOnly())
	released := time.Now()
	lockA <- a
	b := <-gotB
	if b.err != nil {
		t.Fatal(b.err)
	}
	if d := b.at.Sub(released); d > 2*time.Second {
		t.Fatalf("the next in line got the lock %v after the one before it let go, want at once", d.Round(time.Millisecond))
	}
	if err := b.lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
