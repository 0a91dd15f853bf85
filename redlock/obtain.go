package redlock

import (
	"context"
	"errors"
	"strings"
)

// Obtain acquires the lock on key, retrying per WithRetry (DefaultRetry)
// until it succeeds, the strategy gives up, or ctx ends; between attempts it
// sleeps until a release is announced or its timer fires, and goroutines of
// one Locker take turns (docs/internals.md#how-a-round-works). The key must
// be non-empty, at most MaxKeyLen bytes, and not start with ReservedPrefix.
// On failure it leaves no key of its own and returns an error matching
// ErrNotObtained (contention), ErrNoQuorum (outage) or ErrMisconfigured, told
// from the nodes' answers and detailed in a *QuorumError, with ctx.Err()
// joined when ctx ended; ErrInvalid, asking no node, for bad input. It
// takes a read-write lock's writer key without looking at its readers'
// leases: writers beside readers take RWMutex.Lock.
func (l *Locker) Obtain(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.acquire(ctx, []string{key}, opts, false)
}

// TryObtain makes exactly one attempt to acquire the lock on key, whatever
// the retry strategy; on failure it behaves as Obtain does. A ctx that ends
// during the attempt does not cut it short: a lock granted by a majority
// with validity left is returned.
func (l *Locker) TryObtain(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.acquire(ctx, []string{key}, opts, true)
}

// acquire is every acquisition: of one key or of several (keys, which the
// caller no longer changes), with retries or exactly one attempt (once).
func (l *Locker) acquire(ctx context.Context, keys []string, opts []LockOption, once bool) (lock *Lock, err error) {
	a := l.newAcquisition(keys)
	return a.perform(ctx, l.checkKeys(keys), opts, once)
}

// acquireKind is the acquisition of a lock of kind kd whose keys its plan
// chooses (a semaphore's slot keys, a read-write lock's keys): its name,
// its line and the key it listens on are all kd.line(nil).
func (l *Locker) acquireKind(ctx context.Context, kd *lockKind, opts []LockOption, once bool) (*Lock, error) {
	a := &acquisition{l: l, kind: kd}
	a.name = kd.line(nil)
	a.line, a.keys = a.name, []string{a.name}
	return a.perform(ctx, nil, opts, once)
}

// perform runs the acquisition a: one attempt when once is set, else the
// retry loop. It fails at once, asking no node, with bad (the error that
// checking the keys returned, nil when they are good), a bad option, an
// option the lock's kind cannot have, or (retrying) an ended ctx. The
// observer sees the call begin and end.
func (a *acquisition) perform(ctx context.Context, bad error, opts []LockOption, once bool) (lock *Lock, err error) {
	l := a.l
	ctx, a.tr = l.cfg.obs.begin(ctx, OpObtain, a.name)
	defer func() { a.tr.obtained(ctx, lock, err) }()
	err = bad
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
		lock, err := a.retryLoop(ctx)
		if err != nil {
			return nil, a.giveUp(ctx, err)
		}
		return lock, nil
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
	// lateGrant, made by Obtain's retry loop (nil for a lone attempt),
	// is signalled when a node grants one of the attempts only after it
	// failed (see settle.act): the waiter then tries again soon.
	lateGrant chan struct{}
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

// giveUp completes the error of a call that gives up with err: a bad call,
// a closed Locker or misconfigured nodes as they are; contention with the
// holders' metadata when ctx is alive (withHolders); and ctx's error joined
// when it ended.
func (a *acquisition) giveUp(ctx context.Context, err error) error {
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) || errors.Is(err, ErrMisconfigured) {
		return err
	}
	if a.kind.namesHolders {
		err = a.l.withHolders(ctx, a.name, err)
	}
	return withContext(ctx, err)
}
