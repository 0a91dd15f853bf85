package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// slowCluster is n servers reached through forwarders that can hold back
// their replies.
type slowCluster struct {
	servers  []*redistest.Server
	forwards []*redistest.Forwarder
	clients  []*redis.Client
}

func newSlowCluster(t *testing.T, n int) *slowCluster {
	t.Helper()
	c := &slowCluster{servers: redistest.StartT(t, n, redistest.Options{})}
	for _, s := range c.servers {
		f := redistest.ForwardT(t, s.Addr)
		c.forwards = append(c.forwards, f)
		c.clients = append(c.clients, f.ClientT(t))
	}
	return c
}

// setDelay holds back every node's replies by d from now on.
func (c *slowCluster) setDelay(d time.Duration) {
	for _, f := range c.forwards {
		f.SetDelay(d)
	}
}

// awaitWarning waits until held is cancelled and returns when that was
// seen, and the lock's Until read just after. It fails the test when the
// lock's Until passes first: the validity ended and the work was not told.
func awaitWarning(t *testing.T, lock *redlock.Lock, held context.Context) (told, until time.Time) {
	t.Helper()
	for {
		u := lock.Until()
		timer := time.NewTimer(time.Until(u))
		select {
		case <-held.Done():
			timer.Stop()
			return time.Now(), lock.Until()
		case <-timer.C:
			if !lock.Until().After(u) && held.Err() == nil {
				t.Fatalf("the lock's validity ended (Until %s) and the work was not told", u.Format(time.StampMicro))
			}
		}
	}
}

// With every node stalled during Do, fn's context is cancelled at the
// latest the node timeout (plus a margin) before Until, not when the
// extension in flight gives up.
func TestDoWarnsBeforeValidityEnds(t *testing.T) {
	const (
		ttl         = time.Second
		nodeTimeout = 300 * time.Millisecond
		// slack absorbs timers and goroutines running late on a loaded
		// machine; the warning is due 50ms (the margin) earlier still.
		slack = 150 * time.Millisecond
	)
	drift := clock.Drift(ttl, redlock.DefaultDriftFactor)
	tests := []struct {
		name string
		// setup returns the clients, and functions that stall every
		// node and undo it.
		setup func(t *testing.T) (clients []*redis.Client, stall func() error, resume func())
	}{
		{"paused", func(t *testing.T) ([]*redis.Client, func() error, func()) {
			c := newCluster(t, 3)
			stall := func() error {
				for _, s := range c.servers {
					if err := s.Pause(); err != nil {
						return err
					}
				}
				return nil
			}
			resume := func() {
				for _, s := range c.servers {
					if err := s.Resume(); err != nil {
						t.Error(err)
					}
				}
			}
			return c.clients, stall, resume
		}},
		{"slow replies", func(t *testing.T) ([]*redis.Client, func() error, func()) {
			c := newSlowCluster(t, 3)
			// Replies later than the node timeout: every extension
			// round runs to its timeout, as with paused nodes, though
			// the servers apply it.
			return c.clients, func() error { c.setDelay(2 * time.Second); return nil }, func() { c.setDelay(0) }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clients, stall, resume := tt.setup(t)
			l := newLocker(t, clients, redlock.WithTTL(ttl), redlock.WithNodeTimeout(nodeTimeout))
			// Dial every node first, so that Do's acquisition is quick
			// and the bounds on Until below are tight.
			warm, err := l.Obtain(t.Context(), "warm-up")
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			var fnStart, stalled, told time.Time
			var cause error
			begin := time.Now()
			err = l.Do(t.Context(), "k", func(ctx context.Context) error {
				fnStart = time.Now()
				if err := stall(); err != nil {
					return err
				}
				stalled = time.Now()
				select {
				case <-ctx.Done():
					told, cause = time.Now(), context.Cause(ctx)
				case <-time.After(5 * ttl):
					return errors.New("fn's context was not cancelled")
				}
				return nil
			})
			resume()
			if !errors.Is(err, redlock.ErrLockLost) {
				t.Fatalf("Do = %v, want ErrLockLost", err)
			}
			if !errors.Is(cause, redlock.ErrLockLost) {
				t.Fatalf("fn's context cause = %v, want ErrLockLost", cause)
			}
			// The acquisition started after begin and was decided before
			// fnStart, so Until = start + ttl - elapsed - drift lies in
			// [begin + ttl - drift - (fnStart - begin), fnStart + ttl - drift].
			earliest := begin.Add(ttl - drift - fnStart.Sub(begin))
			latest := fnStart.Add(ttl - drift)
			// No extension may have started before the stall (it would
			// move Until): the first is due two thirds of the TTL before it.
			if firstExtension := earliest.Add(-2 * ttl / 3); !stalled.Before(firstExtension) {
				t.Fatalf("the nodes stalled %v after fn started, after the first extension was due: the machine is too slow for this test", stalled.Sub(fnStart))
			}
			if !told.Before(earliest) {
				t.Fatalf("fn was told %v after the lock's validity ended", told.Sub(earliest))
			}
			if limit := latest.Add(-nodeTimeout + slack); !told.Before(limit) {
				t.Fatalf("fn was told %v before Until, want at least %v (node timeout %v, slack %v)", latest.Sub(told), nodeTimeout-slack, nodeTimeout, slack)
			}
			t.Logf("told %v before Until", earliest.Sub(told))
		})
	}
}

// Replies slower than usual but within the node timeout: an extension is
// still in flight when the warning is due. The work is told anyway, and the
// loss stays final when that extension succeeds afterwards.
func TestKeepAliveLossIsFinal(t *testing.T) {
	const (
		ttl         = 4 * time.Second
		nodeTimeout = 1250 * time.Millisecond
		delay       = time.Second
		// With the warning nodeTimeout + ttl/20 = 1450ms before Until, an
		// extension that takes delay ends 258ms before the warning, and
		// the next one, started right away, 492ms after it.
		slack = 150 * time.Millisecond
	)
	c := newSlowCluster(t, 3)
	l := newLocker(t, c.clients, redlock.WithTTL(ttl), redlock.WithNodeTimeout(nodeTimeout))
	lock := mustObtain(t, l, "k")
	c.setDelay(delay)
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	obtainedUntil := lock.Until()
	told, until := awaitWarning(t, lock, held)
	if cause := context.Cause(held); !errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
	if !until.After(obtainedUntil) {
		t.Fatalf("no extension succeeded before the warning (Until still %s)", until.Format(time.StampMicro))
	}
	if limit := until.Add(-nodeTimeout + slack); !told.Before(limit) {
		t.Fatalf("told %v before Until, want at least %v", until.Sub(told), nodeTimeout-slack)
	}
	if lock.Valid() {
		t.Fatal("lock Valid after the warning")
	}
	// stop waits for the extension in flight, which succeeds on the
	// servers: Until moves, but the lock stays lost.
	stop()
	if !lock.Until().After(until) {
		t.Fatalf("Until did not move after the warning (%s): no extension was in flight when it came", until.Format(time.StampMicro))
	}
	if lock.Valid() {
		t.Fatal("the late extension made the lost lock Valid again")
	}
	if err := lock.Extend(t.Context(), ttl); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend after the loss = %v, want ErrLockLost", err)
	}
}

// A TTL that leaves no time to extend before the warning is the caller's
// mistake, reported as such instead of an instant loss.
func TestKeepAliveRejectsTTLTooShortToKeep(t *testing.T) {
	c := newCluster(t, 3)
	// 1s - 12ms drift - (500ms + 50ms warning) leaves 438ms, less than
	// one extension bounded by the 500ms node timeout.
	opts := []redlock.LockOption{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(500 * time.Millisecond)}
	l := c.locker(t)
	ran := false
	err := l.Do(t.Context(), "short", func(context.Context) error { ran = true; return nil }, opts...)
	if !errors.Is(err, redlock.ErrInvalid) || ran {
		t.Fatalf("Do = %v, ran %v; want ErrInvalid without running fn", err, ran)
	}
	if v := c.values(t, "short"); v[0]+v[1]+v[2] != "" {
		t.Fatalf("Do left keys on the nodes: %q", v)
	}

	// Obtain, not TryObtain: it retries a first dial slower than the
	// node timeout on a loaded machine.
	lock, err := l.Obtain(t.Context(), "short", opts...)
	if err != nil {
		t.Fatal(err)
	}
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	if held.Err() == nil {
		t.Fatal("KeepAlive's context is not cancelled")
	}
	if cause := context.Cause(held); !errors.Is(cause, redlock.ErrInvalid) || errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrInvalid and not ErrLockLost", cause)
	}
	if !lock.Valid() {
		t.Fatal("the rejected KeepAlive ended the lock")
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

	// Twice the node timeout, the margin and the drift fit: accepted.
	ok, err := l.Obtain(t.Context(), "long-enough", redlock.WithTTL(time.Second), redlock.WithNodeTimeout(400*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	held, stop = ok.KeepAlive(t.Context())
	if held.Err() != nil {
		t.Fatalf("KeepAlive with TTL 1s, node timeout 400ms: %v", context.Cause(held))
	}
	stop()
	if err := ok.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A panic in fn stops the extension and releases the lock, and goes on
// with its own value.
func TestDoPanicReleases(t *testing.T) {
	ignore := []goleak.Option{goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")}
	// Registered first, so it runs after every other cleanup (the
	// Locker's Close, the clients').
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
	c := newCluster(t, 3)
	l := c.locker(t)
	type boom struct{ n int }
	var token string
	got := func() (v any) {
		defer func() { v = recover() }()
		_ = l.Do(t.Context(), "p", func(ctx context.Context) error {
			st, err := l.Inspect(ctx, "p")
			if err != nil {
				t.Error(err)
			}
			token = st.Holder
			panic(&boom{7})
		})
		return nil
	}()
	if b, ok := got.(*boom); !ok || b.n != 7 {
		t.Fatalf("recovered %v, want fn's own panic value", got)
	}
	if token == "" {
		t.Fatal("fn did not see the lock held")
	}
	// Another Locker gets it at once.
	other := newLocker(t, c.clients)
	next := mustObtain(t, other, "p")
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Close waits for the release's last node; no extension left running
	// brings our key back.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.holders(t, "p", token); n != 0 {
		t.Fatalf("the key is still on %d nodes after fn panicked", n)
	}
}

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

// Releasing while KeepAlive still runs ends its context at once with
// ErrReleased: no false loss, and no work left running as if it held the
// lock.
func TestKeepAliveAfterReleaseIsNotLoss(t *testing.T) {
	l := newCluster(t, 1).locker(t, redlock.WithTTL(300*time.Millisecond), redlock.WithNodeTimeout(100*time.Millisecond))
	lock := mustObtain(t, l, "k")
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Done():
	default:
		t.Fatal("KeepAlive's context live after Release")
	}
	if cause := context.Cause(held); !errors.Is(cause, redlock.ErrReleased) || errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("KeepAlive reported %v after a plain Release; want ErrReleased, no loss", cause)
	}
}

// slowRounds is the real clock, except that every round seems to have
// taken extra longer than it did.
type slowRounds struct{ extra time.Duration }

func (c slowRounds) Now() time.Time                  { return time.Now() }
func (c slowRounds) Since(t time.Time) time.Duration { return time.Since(t) + c.extra }

// A lock whose acquisition left less validity than KeepAlive's warning
// needs is lost as KeepAlive begins, before it returns, and Do does not
// start its work on it: the work would run unprotected, its context
// cancelled a moment after it began. (The chaos suite's Do holds showed
// exactly that: work started after the lock's validity, told of the loss
// microseconds later.)
func TestDoDoesNotStartOnLockLostAlready(t *testing.T) {
	c := newCluster(t, 3)
	// testOpts: TTL 10s, node timeout 1s, so the warning comes 1.5s before
	// Until; each acquisition leaves about 500ms of validity.
	const ttl, left = 10 * time.Second, 500 * time.Millisecond
	late := slowRounds{extra: ttl - clock.Drift(ttl, redlock.DefaultDriftFactor) - left}
	l := c.locker(t, redlock.WithClock(late))

	lock := mustObtain(t, l, "k")
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	if cause := context.Cause(held); !errors.Is(cause, redlock.ErrLockLost) || !errors.Is(cause, redlock.ErrLockExpired) {
		t.Fatalf("KeepAlive's context as it returned: cause %v, want ErrLockLost and ErrLockExpired", cause)
	}
	if lock.Valid() {
		t.Error("the lock is still Valid after KeepAlive found it lost")
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}

	ran := false
	err := l.Do(t.Context(), "k", func(context.Context) error {
		ran = true
		return nil
	})
	if ran {
		t.Fatal("Do ran its work on a lock lost before the work began")
	}
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Do: %v, want ErrLockLost", err)
	}
	t.Logf("Do: %v", err)
	if !c.emptied(t, "k") {
		t.Errorf("nodes keep %q after Do gave the lock up", c.values(t, "k"))
	}
}
