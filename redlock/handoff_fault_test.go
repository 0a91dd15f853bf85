package redlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// hookClock is the real clock, shifted by an offset that a test moves; it
// can run a hook right after its next Since, which is when a round's
// validity is computed (at the majority).
type hookClock struct {
	mu     sync.Mutex
	offset time.Duration
	after  func()
}

func (c *hookClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *hookClock) Since(t time.Time) time.Duration {
	d := c.Now().Sub(t)
	c.mu.Lock()
	f := c.after
	c.after = nil
	c.mu.Unlock()
	if f != nil {
		f()
	}
	return d
}

// afterNextSince runs f once, right after the next call of Since.
func (c *hookClock) afterNextSince(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.after = f
}

// jump moves the clock forward by d.
func (c *hookClock) jump(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// tokenOf returns the token of a raw lock value ("" for none).
func tokenOf(v string) string {
	tok, _, _ := strings.Cut(v, "\x00")
	return tok
}

// awaitOnly waits until no node holds key for any token but token.
func awaitOnly(t *testing.T, c *cluster, key, token string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var others []string
		for _, v := range c.values(t, key) {
			if v != "" && tokenOf(v) != token {
				others = append(others, tokenOf(v))
			}
		}
		if len(others) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes still hold %q for tokens %q besides %q", key, others, token)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A lock delivered by a handoff is checked for validity when its owner takes
// it over: here the clock jumps past the lock's validity right after the
// handoff round measured it. The handoff then counts as failed and is
// undone, and the waiter, trying again at once, returns a lock of its own
// that is valid; a lock whose Until has passed is never returned.
func TestHandoffPastValidityIsNotReturned(t *testing.T) {
	c := newCluster(t, 3)
	clk := &hookClock{}
	l := c.locker(t, redlock.WithClock(clk))
	held := mustObtain(t, l, "late")
	got := obtainAsync(t.Context(), l, "late", slowRetry)
	awaitOffer(t, l, "late")
	// The next Since is the handoff round's, at its majority.
	clk.afterNextSince(func() { clk.jump(time.Minute) })
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if now := clk.Now(); !r.lock.Until().After(now) || !r.lock.Valid() {
		t.Fatalf("Obtain returned a lock valid until %v, at %v: its validity had passed", r.lock.Until(), now)
	}
	if n := c.holders(t, "late", r.lock.Token()); n < 2 {
		t.Fatalf("the returned lock is on %d of 3 nodes", n)
	}
	// The handoff's keys go: at once where its round saw them granted, as
	// its straggler's reply comes in elsewhere (the retry may have found
	// that node still taken; it then stays free).
	awaitOnly(t, c, "late", r.lock.Token())
	if err := r.lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Close between a handoff round and its take-over leaves no key behind: the
// waiter gets ErrClosed, and the handoff's writes are undone before Close
// returns.
func TestCloseBeforeTakeOverUndoesHandoff(t *testing.T) {
	c := newCluster(t, 3)
	clk := &hookClock{}
	l := c.locker(t, redlock.WithClock(clk))
	held := mustObtain(t, l, "closing")
	got := obtainAsync(t.Context(), l, "closing", slowRetry)
	awaitOffer(t, l, "closing")
	closed := make(chan error, 1)
	// At the handoff round's majority (the Release holds the Locker open),
	// start Close and let the round go on only once Close waits: the
	// waiter then takes the handoff over after Close has begun.
	clk.afterNextSince(func() {
		go func() { closed <- l.Close() }()
		deadline := time.Now().Add(10 * time.Second)
		for !redlock.Closing(l) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if !redlock.Closing(l) {
			t.Error("Close did not begin within 10s")
		}
	})
	if err := held.Release(t.Context()); err != nil {
		t.Fatalf("Release with a handoff: %v", err)
	}
	r := <-got
	if r.lock != nil || !errors.Is(r.err, redlock.ErrClosed) {
		t.Fatalf("waiter after Close: lock %v, error %v; want no lock and ErrClosed", r.lock != nil, r.err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	// Close waited for the undo.
	for i, v := range c.values(t, "closing") {
		if v != "" {
			t.Errorf("node %d still has a key after Close: %q", i, v)
		}
	}
}

// A handoff whose acquisition the nodes refuse (the restart guard's
// ABSTAIN: here every node lost its memory marker, as after a flush of the
// marker alone) still takes the old owner's key away; the nodes must then
// announce the release, or waiters in other processes sleep until the old
// key's TTL. Another Locker (another process) waiting on the key is woken
// and gets it long before that.
func TestRefusedHandoffWakesOtherProcesses(t *testing.T) {
	c := newCluster(t, 3)
	a := c.locker(t, redlock.WithRestartGuard(time.Minute))
	if err := a.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Without the announcement, the other Locker sleeps until this TTL
	// ends (its retry timer is longer still).
	const ttl = 30 * time.Second
	held := mustObtain(t, a, "abstain", redlock.WithTTL(ttl))
	local := obtainAsync(t.Context(), a, "abstain", slowRetry)
	awaitOffer(t, a, "abstain")
	b := c.locker(t)
	other := obtainAsync(t.Context(), b, "abstain", redlock.WithRetry(redlock.LinearBackoff(time.Minute)))
	awaitOffer(t, b, "abstain")
	for i, cl := range c.clients {
		if err := cl.Del(t.Context(), "redlock:guard:marker").Err(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	released := time.Now()
	if err := held.Release(t.Context()); err != nil {
		t.Fatalf("Release with a refused handoff: %v", err)
	}
	var r obtained
	select {
	case r = <-other:
	case <-time.After(ttl / 2):
		t.Fatalf("the other Locker was not woken: it still waits %v after the release", time.Since(released))
	}
	if r.err != nil {
		t.Fatalf("the other Locker: %v", r.err)
	}
	if err := r.lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The local waiter's nodes abstain for the guard's minute: end it.
	select {
	case l := <-local:
		t.Fatalf("the local waiter returned (%v) while every node abstains for it", l.err)
	default:
	}
}

// A waiter whose context ends while a Release runs the handoff round for it
// gets no lock: the round may have begun after the end (the Release claimed
// the offer first), and an ended context obtains nothing. The handoff is
// undone, and the waiter returns the context's error.
func TestHandoffToEndedContextIsUndone(t *testing.T) {
	c := newCluster(t, 3)
	clk := &hookClock{}
	l := c.locker(t, redlock.WithClock(clk))
	held := mustObtain(t, l, "gone")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := obtainAsync(ctx, l, "gone", slowRetry)
	awaitOffer(t, l, "gone")
	// At the handoff round's majority, before its result is handed over.
	clk.afterNextSince(cancel)
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.lock != nil || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("waiter whose context ended during the handoff: lock %v, error %v; want no lock and context.Canceled", r.lock != nil, r.err)
	}
	// The undo waits for every node, up to the node timeout; on a loaded
	// machine a node's may come later. The key would expire only after
	// its TTL (testOpts: 10s).
	if !c.emptiedWithin(t, 5*time.Second, "gone") {
		t.Errorf("nodes still have a key after the waiter gave up: %q", c.values(t, "gone"))
	}
}
