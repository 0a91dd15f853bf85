package redlock

import (
	"container/heap"
	"errors"
	"time"
)

// This file holds the extender's rounds: which due keepers go out together
// (dueRounds), the round itself (extend), and what each keeper does after
// it (settle). A round of single-key locks is one extend_many.lua call per
// node (extendMany), an Observer or not; a multi-key lock's is its Extend.

// dueRounds takes the keepers whose extension is due, with those due
// within their window after, up to maxInFlight keys in flight, and groups
// them into rounds. e.mu is held.
func (e *extender) dueRounds(now time.Time) (rounds [][]*keeper) {
	var open [][]*keeper // one per group, until full
	for e.due.Len() > 0 && e.inFlight < maxInFlight {
		kp := e.due.items[0]
		if kp.at[heapDue].After(now.Add(kp.window())) {
			break
		}
		heap.Pop(&e.due)
		if kp.k.released() {
			e.drop(kp)
			continue
		}
		kp.busy = true
		e.inFlight++
		if kp.solo {
			rounds = append(rounds, []*keeper{kp})
			continue
		}
		i := 0
		for i < len(open) && open[i][0].group != kp.group {
			i++
		}
		if i == len(open) {
			open = append(open, make([]*keeper, 0, extendChunk))
		}
		open[i] = append(open[i], kp)
		if len(open[i]) == extendChunk {
			rounds = append(rounds, open[i])
			open = append(open[:i], open[i+1:]...)
		}
	}
	return append(rounds, open...)
}

// extend runs one round for keepers and settles each.
func (e *extender) extend(keepers []*keeper) {
	var errs []error
	if len(keepers) == 1 && keepers[0].solo {
		kp := keepers[0]
		errs = []error{kp.k.Extend(kp.ctx, kp.k.cfg.ttl)}
	} else {
		locks := make([]*Lock, len(keepers))
		for i, kp := range keepers {
			locks[i] = kp.k
		}
		bt := e.l.cfg.obs.beginExtends(e.l, keepers)
		errs = e.l.extendMany(locks, bt)
		bt.done(errs)
	}
	now := time.Now()
	var lost []loss
	e.mu.Lock()
	e.inFlight -= len(keepers)
	for i, kp := range keepers {
		if cause := e.settle(kp, errs[i], now); cause != nil {
			lost = append(lost, loss{kp, cause})
		}
	}
	e.kick()
	e.mu.Unlock()
	for _, n := range lost {
		n.kp.signal(n.cause)
	}
}

// settle plans what comes after kp's round ended with err, and returns the
// cause to tell its work, if the lock is lost. e.mu is held.
func (e *extender) settle(kp *keeper, err error, now time.Time) (lost error) {
	kp.busy = false
	if kp.idle != nil {
		close(kp.idle)
		kp.idle = nil
	}
	if kp.gone {
		return nil
	}
	switch {
	case err == nil:
		kp.at[heapWarn] = kp.warnAt(now)
		heap.Fix(&e.warn, kp.idx[heapWarn])
		kp.at[heapDue] = kp.nextAt(now)
		heap.Push(&e.due, kp)
	case errors.Is(err, ErrLockNotHeld):
		e.drop(kp)
		if !kp.k.released() {
			return &lostError{reason: err}
		}
	case kp.ctx.Err() != nil:
		e.drop(kp)
	default:
		// An outage (ErrNoQuorum: overloaded, slow or dead nodes, or a
		// closed Locker): try again while the validity lasts; the
		// warning ends it otherwise.
		kp.at[heapDue] = kp.retryAt(now)
		heap.Push(&e.due, kp)
	}
	return nil
}
