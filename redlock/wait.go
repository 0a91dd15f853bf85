package redlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// retryLoop attempts, classifies and waits (see waiter) until it has a lock
// or the error to give up with (which giveUp completes).
func (a *acquisition) retryLoop(ctx context.Context) (*Lock, error) {
	w := newWaiter(a)
	defer w.close()
	if err := w.lineUp(ctx); err != nil {
		return nil, err
	}
	seq := a.cfg.retry.Start()
	// last is the last round's error: what a call that gives up reports.
	var (
		last   error
		outage outageWatch // logs a long wait on an outage
	)
	for {
		if w.inLine() { // only a waiter in the line posts an offer (see sleep)
			w.seen = w.a.l.gates.freedCount(w.a.line)
		}
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
			outage.note(a, err)
		}
		switch then {
		case giveUp:
			return nil, last
		case retryNow:
			continue
		}
		slept := a.tr.now()
		lock, err := w.sleep(ctx, wait, last)
		a.tr.waited(ctx, slept)
		if lock != nil || err != nil {
			return lock, err
		}
	}
}

// next is what Obtain does after an attempt, or after finding the lock
// held by a goroutine of its own Locker.
type next int

const (
	sleepFirst next = iota // sleep (see waiter.sleep), then try again
	retryNow               // try again at once
	giveUp                 // return the error
)

// behindHolder waits while a goroutine of this Locker holds the lock got
// from our line, valid for left more: for its release (a handoff, a poke)
// or its validity's end. It returns the error to keep.
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

// afterFailure classifies a failed attempt's err: give up (bad call, closed
// Locker, misconfigured nodes, ended ctx, strategy exhausted, a holder that
// outlives ctx with WithFailFast), or wait as the strategy says but never
// past the holder's expiry, listening and in line from the first
// contention on. It returns the error to keep (last is the previous one).
func (w *waiter) afterFailure(ctx context.Context, seq Sequence, err, last error) (time.Duration, next, error) {
	if errors.Is(err, errNotTried) && last != nil {
		// ctx ended just before this attempt: the last round tells what
		// kept the lock from us.
		return 0, giveUp, last
	}
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) || errors.Is(err, ErrMisconfigured) {
		return 0, giveUp, err
	}
	var qe *QuorumError
	if w.queued && errors.As(err, &qe) {
		w.a.l.gates.recordFailure(w.a.line, qe)
	}
	if ctx.Err() != nil {
		return 0, giveUp, err
	}
	wait, ok := seq.Next()
	if !ok {
		return 0, giveUp, err
	}
	if !errors.As(err, &qe) || !qe.contended() {
		return wait, sleepFirst, err
	}
	if free, known := qe.freeIn(); known {
		if w.outlives(ctx, free) {
			return 0, giveUp, err
		}
		// No point sleeping past the moment enough keys expire.
		wait = min(wait, free+time.Millisecond)
	}
	if qe.split {
		wait = min(wait, w.afterSplit())
	}
	now := false
	if !w.queued {
		joined, jerr := w.join(ctx)
		if jerr != nil {
			return 0, giveUp, err
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

// afterSplit is the longest sleep after an attempt that some node granted,
// in its round or late (settle.grantedLate, which cuts a sleep short): the
// key was free there, most likely a release on its way to the other
// nodes, whose announcements should wake us. But they may all wake us too
// early: each attempt then finds the nodes that released refusing it with
// the grant of our previous attempt, whose undo has not landed yet (a
// straggler's is sent only when its reply comes), and it sleeps until the
// holder's expiry. So try again once the undo has had its node timeout to
// land, with as much again of jitter, as Redlock's clients do after a
// split vote.
func (w *waiter) afterSplit() time.Duration {
	t := w.a.cfg.nodeTimeout
	return t + rand.N(t+1)
}

// outlives reports whether, with WithFailFast, a holder that keeps the key
// for d more makes waiting pointless: it outlives ctx's deadline.
func (w *waiter) outlives(ctx context.Context, d time.Duration) bool {
	dl, has := ctx.Deadline()
	return w.a.cfg.failFast && has && time.Until(dl) < d
}

// notNow is the error of giving up before asking the nodes: the line's
// latest failed round, or else contention.
func (w *waiter) notNow() error {
	if qe := w.a.l.gates.lastFailure(w.a.line); qe != nil {
		return qe
	}
	return newQuorumError("obtain", w.a.name, w.a.l.need, nil, ErrNotObtained)
}
