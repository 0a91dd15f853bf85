package redlock

import (
	"context"
	"errors"
	"time"
)

// retryLoop is the retry loop: attempt, classify, wait (see waiter), until a
// lock, or a reason to give up.
func (a *acquisition) retryLoop(ctx context.Context) (*Lock, error) {
	w := newWaiter(a)
	defer w.close()
	if err := w.lineUp(ctx); err != nil {
		return nil, err
	}
	seq := a.cfg.retry.Start()
	// last is the last round's error: what a call that gives up reports.
	var last error
	for {
		w.drain()
		var (
			wait time.Duration
			then next
		)
		if left, held := w.heldHere(); held {
			// A goroutine of this Locker got the lock from this line and
			// has not released it: asking the nodes would only be refused.
			wait, then, last = w.behindHolder(ctx, left, last)
		} else {
			lock, err := a.attempt(ctx)
			if err == nil {
				return w.got(lock), nil
			}
			wait, then, last = w.afterFailure(ctx, seq, err, last)
		}
		switch then {
		case giveUp:
			if a.kind.holders {
				return nil, a.l.withHolders(ctx, a.name, last)
			}
			return nil, last
		case retryNow:
			continue
		}
		lock, err := w.sleep(ctx, wait, last)
		if lock != nil || err != nil {
			return lock, err
		}
	}
}

// waiter is one acquisition between its attempts. It owns what the call
// waits with: the wake-up channel of the release subscriptions of its keys
// (listen), the call's place in the Locker's line for them (join, see
// gates), the
// retry timer and the handoff offer (sleep); close lets go of all of them.
// It also decides, after each failed attempt, whether to give up, try again
// at once, or sleep first, and for how long (afterFailure, behindHolder).
type waiter struct {
	a *acquisition
	// wake receives a value when a release of a key is announced, once
	// listen has registered.
	wake <-chan struct{}
	// queued is set once this call waits in the Locker's line for its
	// keys (see gates); a re-entry by token never queues, or it could wait
	// behind waiters for a lock it holds itself.
	queued bool
	// stops undoes listen and join, last first.
	stops []func()
	timer *time.Timer
}

func newWaiter(a *acquisition) *waiter {
	return &waiter{a: a, queued: a.cfg.tokenSet}
}

// close stops the timer and leaves the line, then stops listening: the turn
// goes to the next in line before the subscription may end.
func (w *waiter) close() {
	if w.timer != nil {
		w.timer.Stop()
	}
	for i := len(w.stops) - 1; i >= 0; i-- {
		w.stops[i]()
	}
}

// inLine reports whether this call waits in the Locker's line for its
// keys (a re-entry by token never does).
func (w *waiter) inLine() bool { return w.queued && !w.a.cfg.tokenSet }

// listen registers for release notifications of the keys (once): from
// then on a release by any client, or by a goroutine of this Locker, wakes
// us. It reports whether it registered now.
func (w *waiter) listen(ctx context.Context) bool {
	if w.wake != nil || w.a.cfg.pollingOnly {
		return false
	}
	wake, stop := w.a.l.listenAll(ctx, w.a.keys, w.a.cfg.nodeTimeout)
	w.wake = wake
	w.stops = append(w.stops, stop)
	return true
}

// join lines up behind the Locker's other waiters for the keys, listening
// first: the subscription then lasts as long as the line, instead of
// being dropped and taken again at every handoff.
// It reports whether a retry is due at once: others were ahead (our
// turn may come long after the release we missed), or we only now
// started listening (the release may have come before that).
func (w *waiter) join(ctx context.Context) (retryNow bool, err error) {
	listening := w.listen(ctx)
	leave, waited, err := w.a.l.gates.enter(ctx, w.a.line)
	if err != nil {
		return false, err
	}
	w.stops = append(w.stops, leave)
	w.queued = true
	return waited || listening, nil
}

// lineUp joins the line at once when goroutines of this Locker already
// wait for the keys: a newcomer queues behind them instead of trying first (no
// barging). It fails when ctx ends in the line.
func (w *waiter) lineUp(ctx context.Context) error {
	if w.queued || !w.a.l.gates.busy(w.a.line) {
		return nil
	}
	if _, err := w.join(ctx); err != nil {
		return withContext(ctx, w.notNow())
	}
	return nil
}

// outlives reports whether, with WithFailFast, a holder that keeps the key
// for d more makes waiting pointless: it outlives ctx's deadline.
func (w *waiter) outlives(ctx context.Context, d time.Duration) bool {
	dl, has := ctx.Deadline()
	return w.a.cfg.failFast && has && time.Until(dl) < d
}

// notNow is the error when we gave up before asking the nodes: what the
// line's latest round found, if it found anything, or contention (we
// waited behind this Locker's own holder or waiters).
func (w *waiter) notNow() error {
	if qe := w.a.l.gates.last(w.a.line); qe != nil {
		return qe
	}
	return newQuorumError("obtain", w.a.name, w.a.l.need, nil, ErrNotObtained)
}

// heldHere reports whether a goroutine of this Locker got the lock from
// this call's line and has not released it, and for how much longer it is
// valid.
func (w *waiter) heldHere() (time.Duration, bool) {
	if !w.inLine() {
		return 0, false
	}
	return w.a.l.gates.heldFor(w.a.line, w.a.cfg.clock)
}

// got records in the line that this call got lock, and returns it.
func (w *waiter) got(lock *Lock) *Lock {
	if w.inLine() {
		w.a.l.gates.hold(w.a.line, lock.Until())
	}
	return lock
}

// drain drops a wake-up still pending from before an attempt: it is stale,
// and one found after the attempt must mean a release during or after it
// (the channel holds one wake-up: a stale one would swallow the real one).
func (w *waiter) drain() {
	select {
	case <-w.wake:
	default:
	}
}

// sleep waits for wait to pass, a release to be announced, a poke, a
// handoff, or ctx to end; err is the last round's error. It returns the lock
// a handoff gave us, or the error to give up with (err, with ctx's); or
// neither, when the caller should try again.
func (w *waiter) sleep(ctx context.Context, wait time.Duration, err error) (*Lock, error) {
	defer w.a.tr.waited(ctx, w.a.tr.now())
	if w.timer == nil {
		w.timer = time.NewTimer(wait)
	} else {
		w.timer.Reset(wait)
	}
	// The head of the line, waiting for a holder, offers itself for a
	// handoff: a Release by this Locker may give it the lock directly (if
	// its kind has handoffs), or poke it to try at once.
	var o *offer
	if w.inLine() && errors.Is(err, ErrNotObtained) {
		o = newOffer(w.a)
		w.a.l.gates.post(w.a.line, o)
	}
	var (
		handed   handoffResult
		got, end bool
	)
	select {
	case <-ctx.Done():
		end = true
	case <-w.timer.C:
	case <-w.wake:
	case <-o.poked():
	case handed = <-o.outcome():
		got = true
	}
	if o != nil && !got && !w.a.l.gates.withdraw(w.a.line, o) {
		// A Release claimed the offer: its round is under way.
		handed, got = <-o.done, true
	}
	if got {
		if ctx.Err() != nil {
			// A Release ran this round for us, perhaps only after ctx
			// ended (it claimed the offer before we could withdraw it):
			// an ended context obtains nothing, so it is undone. An
			// attempt of our own, by contrast, starts only with a live
			// ctx (see attempt).
			handed.res.OK = false
		}
		lock, herr := o.takeOver(ctx, handed)
		if herr == nil {
			return w.got(lock), nil
		}
		if errors.Is(herr, ErrClosed) {
			return nil, herr
		}
		// The handoff failed (nodes out of reach, say); the key may be
		// free now: try again at once.
	}
	if end || ctx.Err() != nil {
		return nil, withContext(ctx, err)
	}
	return nil, nil
}

// next is what Obtain does after an attempt, or after finding the lock
// held by a goroutine of its own Locker.
type next int

const (
	sleepFirst next = iota // sleep (see waiter.sleep), then try again
	retryNow               // try again at once
	giveUp                 // return the error
)

// behindHolder decides what to do while a goroutine of this Locker holds
// the lock, got from our line, valid for left more: wait for its release
// (a handoff, or a poke) or, should it vanish, for its validity to end.
// last is the last round's error; it returns the error to keep.
func (w *waiter) behindHolder(ctx context.Context, left time.Duration, last error) (time.Duration, next, error) {
	if err := w.a.l.closedErr(); err != nil {
		return 0, giveUp, err
	}
	if !errors.Is(last, ErrNotObtained) {
		last = w.notNow() // else keep the last attempt's detail
	}
	if w.outlives(ctx, left) {
		return 0, giveUp, last
	}
	return left, sleepFirst, last
}

// afterFailure classifies a failed attempt, err, and decides what to do:
// give up (a bad call, a closed Locker, misconfigured nodes, an ended ctx, a strategy that says
// so, a holder that outlives ctx with WithFailFast), or wait before the
// next attempt, as the strategy says but never past the moment the
// holder's keys expire, and listening and in line for the keys from the first
// contention on. last is the previous round's error; it returns the error
// to keep.
func (w *waiter) afterFailure(ctx context.Context, seq Sequence, err, last error) (time.Duration, next, error) {
	if errors.Is(err, errNotTried) && last != nil {
		// ctx ended just before this attempt: the last round tells what
		// kept the lock from us.
		return 0, giveUp, withContext(ctx, last)
	}
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) || errors.Is(err, ErrMisconfigured) {
		return 0, giveUp, err
	}
	var qe *QuorumError
	if w.queued && errors.As(err, &qe) {
		w.a.l.gates.note(w.a.line, qe)
	}
	if ctx.Err() != nil {
		return 0, giveUp, withContext(ctx, err)
	}
	wait, ok := seq.Next()
	if !ok {
		return 0, giveUp, err
	}
	if !errors.Is(err, ErrNotObtained) || !errors.As(err, &qe) {
		return wait, sleepFirst, err
	}
	if free, known := qe.freeIn(); known {
		if w.outlives(ctx, free) {
			return 0, giveUp, err
		}
		// No point sleeping past the moment enough keys expire.
		wait = min(wait, free+time.Millisecond)
	}
	now := false
	if !w.queued {
		joined, jerr := w.join(ctx)
		if jerr != nil {
			return 0, giveUp, withContext(ctx, err)
		}
		now = joined
	}
	if w.listen(ctx) {
		// The release may have come before the subscription did.
		now = true
	}
	if now {
		return 0, retryNow, err
	}
	return wait, sleepFirst, err
}
