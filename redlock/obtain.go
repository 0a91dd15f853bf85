package redlock

import (
	"context"
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
// ErrNotObtained (contention) or ErrNoQuorum (outage), or ErrMisconfigured
// (nodes refuse our commands for good: returned after the first such round,
// whatever ctx), with per-node detail of the last round in a *QuorumError (when it gives up on contention with ctx
// still alive, one more round asks the nodes that refused for the holder's
// metadata, which the error then names); when ctx ended, the error also matches
// ctx.Err(). Which of the two is told from the nodes' answers, never from the
// context: a wait that a deadline ends during an outage is ErrNoQuorum. A ctx
// that has ended before the call asks no node: the error then matches only
// ctx.Err().
func (l *Locker) Obtain(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, []string{key}, opts, false)
}

// TryObtain makes exactly one attempt to acquire the lock on key, whatever
// the retry strategy. On failure it behaves as Obtain does.
//
// A ctx that has ended already asks no node and returns an error matching
// ctx.Err(). One that ends during the attempt does not cut it short: the
// node calls run on their own deadlines, and a lock granted by a majority
// with validity left is returned (see attempt).
func (l *Locker) TryObtain(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	return l.acquire(ctx, []string{key}, opts, true)
}

// acquire is every acquisition: of one key or of several (keys, which the
// caller no longer changes), with retries or exactly one attempt (once).
func (l *Locker) acquire(ctx context.Context, keys []string, opts []Option, once bool) (lock *Lock, err error) {
	a := l.newAcquisition(keys)
	ctx, a.tr = l.cfg.obs.begin(ctx, OpObtain, a.name)
	defer func() { a.tr.obtained(ctx, lock, err) }()
	if err := a.applyOptions(opts); err != nil {
		return nil, err
	}
	if once {
		lock, err = a.attempt(ctx)
		if err != nil && ctx.Err() != nil {
			err = withContext(ctx, err)
		}
		return lock, err
	}
	if ctx.Err() != nil {
		return nil, notTried(ctx, a.name)
	}
	return a.retryLoop(ctx)
}

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
