package redlock

import (
	"context"
	"errors"
	"time"
)

// Obtain acquires the lock on key, retrying per the retry strategy
// (WithRetry, DefaultRetry by default) until it succeeds, the strategy gives
// up, or ctx ends.
//
// While the key is held by another owner, Obtain waits for the holder's
// release: it wakes as soon as any node announces it (one subscription per
// node, shared by every waiter of the Locker), and otherwise retries on its
// timer, never sleeping past the moment the holder's keys expire. Goroutines
// of one Locker that wait for the same key line up in arrival order and only
// the first contends on the nodes, so they take turns instead of splitting
// the votes among themselves (a re-entry with WithToken skips the line).
// When a goroutine of the same Locker releases the key, the first in line
// usually gets the lock in the release's own round trip (a handoff: on every
// node the key goes from the old owner to the new one in one atomic step);
// after a few handoffs in a row the key is released for everyone, so that
// waiters in other processes get their turn.
// With WithFailFast it gives up at once when the holder's keys outlive ctx's
// deadline.
//
// The key must be non-empty, at most MaxKeyLen bytes, and must not start
// with ReservedPrefix ("redlock:"), which names the library's own keys (the
// restart guard's markers, fencing counters, release channels); any other
// byte string is a key. A bad key fails at once with an error matching
// ErrInvalid, before any node is asked; so do bad options.
//
// On failure it returns no lock, leaves no key of its own on any node (late
// replies are cleaned up in the background), and an error that matches
// ErrNotObtained (contention) or ErrNoQuorum (outage) with per-node detail of
// the last round in a *QuorumError; when ctx ended, the error also matches
// ctx.Err(). Which of the two is told from the nodes' answers, never from the
// context: a wait that a deadline ends during an outage is ErrNoQuorum. A ctx
// that has ended before the call asks no node: the error then matches only
// ctx.Err().
func (l *Locker) Obtain(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	cfg, err := l.callConfig(key, opts)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, notTried(ctx, key)
	}
	w := newWaiter(l, key, &cfg)
	defer w.close()
	if err := w.lineUp(ctx); err != nil {
		return nil, err
	}
	seq := cfg.retry.Start()
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
			lock, err := l.attempt(ctx, key, &cfg)
			if err == nil {
				return w.got(lock), nil
			}
			wait, then, last = w.afterFailure(ctx, seq, err, last)
		}
		switch then {
		case giveUp:
			return nil, last
		case retryNow:
			continue
		}
		if lock, err := w.sleep(ctx, wait, last); lock != nil || err != nil {
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

// behindHolder decides what to do while a goroutine of this Locker holds
// the lock, got from our line, valid for left more: wait for its release
// (a handoff, or a poke) or, should it vanish, for its validity to end.
// last is the last round's error; it returns the error to keep.
func (w *waiter) behindHolder(ctx context.Context, left time.Duration, last error) (time.Duration, next, error) {
	if err := w.l.closedErr(); err != nil {
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
// give up (a bad call, a closed Locker, an ended ctx, a strategy that says
// so, a holder that outlives ctx with WithFailFast), or wait before the
// next attempt, as the strategy says but never past the moment the
// holder's keys expire, and listening and in line for key from the first
// contention on. last is the previous round's error; it returns the error
// to keep.
func (w *waiter) afterFailure(ctx context.Context, seq Sequence, err, last error) (time.Duration, next, error) {
	if errors.Is(err, errNotTried) && last != nil {
		// ctx ended just before this attempt: the last round tells what
		// kept the lock from us.
		return 0, giveUp, withContext(ctx, last)
	}
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) {
		return 0, giveUp, err
	}
	var qe *QuorumError
	if w.queued && errors.As(err, &qe) {
		w.l.gates.note(w.key, qe)
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

// TryObtain makes exactly one attempt to acquire the lock on key, whatever
// the retry strategy. On failure it behaves as Obtain does.
//
// A ctx that has ended already asks no node and returns an error matching
// ctx.Err(). One that ends during the attempt does not cut it short: the
// node calls run on their own deadlines, and a lock granted by a majority
// with validity left is returned (see attempt).
func (l *Locker) TryObtain(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	cfg, err := l.callConfig(key, opts)
	if err != nil {
		return nil, err
	}
	lock, err := l.attempt(ctx, key, &cfg)
	if err != nil && ctx.Err() != nil {
		err = withContext(ctx, err)
	}
	return lock, err
}
