package redlock

import (
	"context"
	"strings"
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
func (l *Locker) Obtain(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.acquire(ctx, []string{key}, opts, false)
}

// TryObtain makes exactly one attempt to acquire the lock on key, whatever
// the retry strategy. On failure it behaves as Obtain does.
//
// A ctx that has ended already asks no node and returns an error matching
// ctx.Err(). One that ends during the attempt does not cut it short: the
// node calls run on their own deadlines, and a lock granted by a majority
// with validity left is returned (see attempt).
func (l *Locker) TryObtain(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.acquire(ctx, []string{key}, opts, true)
}

// acquire is every acquisition: of one key or of several (keys, which the
// caller no longer changes), with retries or exactly one attempt (once).
func (l *Locker) acquire(ctx context.Context, keys []string, opts []LockOption, once bool) (lock *Lock, err error) {
	a := l.newAcquisition(keys)
	ctx, a.tr = l.cfg.obs.begin(ctx, OpObtain, a.name)
	defer func() { a.tr.obtained(ctx, lock, err) }()
	err = checkKeys(keys)
	if err == nil {
		a.cfg, err = l.options(opts)
	}
	if err == nil && a.kind.check != nil {
		err = a.kind.check(&a.cfg)
	}
	if err != nil {
		return nil, err
	}
	if !once {
		if ctx.Err() != nil {
			// An ended ctx asks no node, and waits in no line.
			return nil, notTried(ctx, a.name)
		}
		return a.retryLoop(ctx)
	}
	return a.try(ctx)
}

// acquisition is one Obtain, TryObtain, ObtainMulti or TryObtainMulti
// call: the lock it wants (its kind, keys and name), the call's config, and
// its trace. Every step of the call, from its attempts to the waiter
// between them, takes it.
type acquisition struct {
	l    *Locker
	kind *lockKind
	// keys are the lock's keys; name is the key, or the keys joined by
	// commas: what messages and the observer call the lock.
	keys []string
	name string
	// line is the id of the Locker's line for the keys (gates).
	line string
	cfg  config
	tr   opTrace
}

// newAcquisition is the acquisition of a lock on keys, which the caller
// no longer changes; its kind follows from their count.
func (l *Locker) newAcquisition(keys []string) *acquisition {
	a := &acquisition{l: l, kind: &oneKey, keys: keys}
	if len(keys) != 1 {
		a.kind = &manyKeys
		a.name = strings.Join(keys, ",")
	} else {
		a.name = keys[0]
	}
	if len(keys) > 0 {
		a.line = a.kind.line(keys)
	}
	return a
}
