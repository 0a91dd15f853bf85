package redlock

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"time"
)

// extender keeps a Locker's KeepAlive locks extended: one goroutine and two
// timer heaps for all of them, instead of a goroutine and two timers per
// lock. Extensions due within a short window of each other share rounds:
// one extend_many.lua call per node carries up to extendChunk keys, so a
// process holding 10^5 locks sends a few calls a second, not thousands. A
// round that fails (an overloaded, slow or dead node) is retried, with
// jitter, until the last moment from which a round still ends before the
// warning; a lock is lost only when the nodes say it is not ours, or when
// its warning comes with no extension through.
//
// Warnings are kept apart from extensions (the warn heap holds every
// keeper, the due heap only those with no round in flight), so that a
// warning is never held up by rounds in flight or by the cap on them.
//
// The goroutine starts with the first keeper and ends when none is left;
// rounds run in goroutines of their own, each holding the Locker's guard, so
// Close waits for them.
type extender struct {
	l    *Locker
	mu   sync.Mutex
	due  keeperHeap // keepers with no round in flight, by when the next is due
	warn keeperHeap // every keeper, by when its work must be warned
	// inFlight counts the keys in rounds now; at maxInFlight, due
	// extensions wait for a round to end, so that a burst never floods the
	// node queues.
	inFlight int
	running  bool
	wake     chan struct{} // buffered 1: run looks at the heaps again
	// closed is set by endAll (the Locker's Close): KeepAlive keeps
	// nothing from then on.
	closed bool
}

const (
	// extendChunk is the most keys in one extend_many.lua call: about
	// half a millisecond of work for a server, so the calls of other
	// operations are not held up behind it.
	extendChunk = 128
	// maxInFlight is the most keys in extension rounds at once, per
	// Locker: 16 calls per node.
	maxInFlight = 16 * extendChunk
)

// add starts keeping k extended; ctx is the work's context, lose cancels
// it.
func (e *extender) add(k *Lock, ctx context.Context, lose context.CancelCauseFunc) *keeper {
	kp := newKeeper(k, ctx, lose)
	now := time.Now()
	if !kp.warnAt(now).After(now) {
		// The warning is due already: tell the work now, before KeepAlive
		// returns, so that it does not start on a lock it must not count
		// on (the run goroutine would tell it a moment after it started).
		kp.gone, kp.unwatch = true, func() bool { return false }
		err := &lostError{reason: errNoTimeLeft}
		k.markLost(err)
		kp.signal(err)
		return kp
	}
	e.mu.Lock()
	// A released lock, or a closed Locker, keeps nothing: the work's
	// context ends at once, with the reason. Checked under e.mu, which
	// Release's and Close's ending of contexts take after they are
	// marked, so that a KeepAlive racing them is ended by one or the
	// other.
	if cause := e.refuse(k); cause != nil {
		if cause == ErrClosed {
			cause = &lostError{reason: ErrClosed}
		}
		e.mu.Unlock()
		kp.gone, kp.unwatch = true, func() bool { return false }
		kp.lose(cause)
		return kp
	}
	k.kept = append(slices.DeleteFunc(k.kept, func(o *keeper) bool { return o.gone }), kp)
	kp.at[heapWarn] = kp.warnAt(now)
	kp.at[heapDue] = kp.nextAt(now)
	heap.Push(&e.warn, kp)
	heap.Push(&e.due, kp)
	e.kick()
	e.mu.Unlock()
	// The work's context ends (or its caller's): stop keeping it.
	kp.unwatch = context.AfterFunc(ctx, func() {
		e.mu.Lock()
		e.drop(kp)
		e.mu.Unlock()
	})
	return kp
}

// refuse is why k can no longer be kept: ErrReleased once it was
// released, ErrClosed once its Locker was closed; nil otherwise. e.mu is
// held.
func (e *extender) refuse(k *Lock) error {
	switch {
	case e.closed:
		return ErrClosed
	case k.released():
		return ErrReleased
	}
	return nil
}

// endLock stops keeping k and ends the contexts its KeepAlive calls
// returned, with cause: Release calls it once the lock is marked released.
func (e *extender) endLock(k *Lock, cause error) {
	e.mu.Lock()
	var ended []*keeper
	// A clone: drop takes each keeper out of k.kept.
	for _, kp := range slices.Clone(k.kept) {
		if !kp.gone {
			e.drop(kp)
			ended = append(ended, kp)
		}
	}
	k.kept = nil
	e.mu.Unlock()
	for _, kp := range ended {
		kp.lose(cause)
	}
}

// endAll stops keeping every lock and ends the contexts of their KeepAlive
// calls (and so of every Leadership), for good, with a cause matching
// ErrLockLost and ErrClosed: the Locker's Close, after which nothing
// extends the locks.
func (e *extender) endAll() {
	e.mu.Lock()
	e.closed = true
	ended := slices.Clone(e.warn.items)
	for _, kp := range ended {
		e.drop(kp)
		kp.k.kept = nil
	}
	e.mu.Unlock()
	cause := &lostError{reason: ErrClosed}
	for _, kp := range ended {
		kp.lose(cause)
	}
}

// stop stops keeping kp and waits for its round in flight, if any.
func (e *extender) stop(kp *keeper) {
	kp.unwatch()
	e.mu.Lock()
	e.drop(kp)
	var idle chan struct{}
	if kp.busy {
		if kp.idle == nil {
			kp.idle = make(chan struct{})
		}
		idle = kp.idle
	}
	e.mu.Unlock()
	if idle != nil {
		<-idle
	}
}

// kick makes run look at the heaps again, starting it if needed. e.mu is
// held.
func (e *extender) kick() {
	if e.running {
		select {
		case e.wake <- struct{}{}:
		default:
		}
		return
	}
	if e.warn.Len() > 0 {
		e.running = true
		if e.wake == nil {
			e.wake = make(chan struct{}, 1)
		}
		go e.run()
	}
}

// drop takes kp out of both heaps for good. e.mu is held.
func (e *extender) drop(kp *keeper) {
	if kp.gone {
		return
	}
	kp.gone = true
	kp.k.kept = slices.DeleteFunc(kp.k.kept, func(o *keeper) bool { return o == kp })
	for h, q := range []*keeperHeap{&e.due, &e.warn} {
		if i := kp.idx[h]; i >= 0 {
			heap.Remove(q, i)
		}
	}
	if e.warn.Len() == 0 {
		e.kick() // so that run ends
	}
}

// moved re-times the keepers of k after its Until moved by an Extend of
// the owner's own, earlier or later: the warning follows Until, and an
// extension due after the last moment from which it still ends before the
// warning comes at that moment instead.
func (e *extender) moved(k *Lock) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, kp := range k.kept {
		if kp.gone || kp.idx[heapWarn] < 0 {
			continue
		}
		kp.at[heapWarn] = kp.warnAt(now)
		heap.Fix(&e.warn, kp.idx[heapWarn])
		if i := kp.idx[heapDue]; i >= 0 {
			kp.at[heapDue] = kp.extendAt(now, kp.at[heapDue].Sub(now))
			heap.Fix(&e.due, i)
		}
	}
	e.kick()
}

// run is the extender's goroutine.
func (e *extender) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		e.mu.Lock()
		if e.warn.Len() == 0 {
			e.running = false
			e.mu.Unlock()
			return
		}
		lost := e.warnings(now)
		rounds := e.dueRounds(now)
		next := now // none left: look again, and end
		if e.warn.Len() > 0 {
			next = e.warn.items[0].at[heapWarn]
		}
		if e.due.Len() > 0 && e.inFlight < maxInFlight {
			next = minTime(next, e.due.items[0].at[heapDue])
		}
		e.mu.Unlock()
		for _, n := range lost {
			n.kp.signal(n.cause)
		}
		for _, r := range rounds {
			go e.extend(r)
		}
		timer.Reset(time.Until(next))
		select {
		case <-timer.C:
		case <-e.wake:
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// loss is a keeper whose work must be told of a loss, and the cause.
type loss struct {
	kp    *keeper
	cause error
}

// warnings drops the keepers whose warning is due and returns those whose
// work must be told. e.mu is held.
func (e *extender) warnings(now time.Time) (lost []loss) {
	for e.warn.Len() > 0 && !e.warn.items[0].at[heapWarn].After(now) {
		kp := e.warn.items[0]
		if kp.k.released() {
			e.drop(kp) // the owner let go; nothing is lost
			continue
		}
		if w := kp.warnAt(now); w.After(now) {
			// Until moved (an Extend of the owner's own).
			kp.at[heapWarn] = w
			heap.Fix(&e.warn, 0)
			continue
		}
		// No extension reached a majority in time. Tell the work now; a
		// round in flight cannot undo it.
		e.drop(kp)
		err := &lostError{reason: ErrLockExpired}
		kp.k.markLost(err)
		lost = append(lost, loss{kp, err})
	}
	return lost
}
