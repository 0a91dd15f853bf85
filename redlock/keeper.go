package redlock

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// The heaps a keeper is in, indexes of its at and idx.
const (
	heapDue = iota
	heapWarn
)

// keeper is one KeepAlive.
type keeper struct {
	k    *Lock
	ctx  context.Context // the work's, as KeepAlive returned it
	lose context.CancelCauseFunc
	// solo keepers are extended alone with Extend: multi-key locks, whose
	// keys must be extended together, which extend_many.lua does not do
	// (their path is a separate change). Nothing else makes a keeper
	// solo: an Observer sees a shared round's locks each as its own
	// Extend (batchTrace), and a clock of any type keys a group.
	solo  bool
	group extendGroup
	at    [2]time.Time // when due, when to warn: in heap order, by time.Now
	idx   [2]int       // the keeper's place in each heap; -1 when out
	busy  bool         // a round for it is in flight
	gone  bool         // no longer kept: stopped, ended or lost
	// idle, made by stop when a round is in flight, is closed when it
	// ends.
	idle    chan struct{}
	unwatch func() bool
}

// extendGroup is what the locks extended in one round must share. The
// clock is compared by its identity (config.clockID), so that a clock of
// any type, comparable or not, can key a group. On cluster nodes the keys
// of one call must share a slot (-1: any slot will do).
type extendGroup struct {
	ttl, timeout, lockDelay time.Duration
	drift                   float64
	clock                   *clock.Clock
	slot                    int
}

func newKeeper(k *Lock, ctx context.Context, lose context.CancelCauseFunc) *keeper {
	c := &k.cfg
	kp := &keeper{k: k, ctx: ctx, lose: lose, idx: [2]int{-1, -1}}
	kp.solo = k.multi() || k.kind.extendAlone
	if !kp.solo {
		kp.group = extendGroup{ttl: c.ttl, timeout: c.nodeTimeout, lockDelay: c.lockDelay, drift: c.driftFactor, clock: c.clockID, slot: -1}
		if c.layout.Clustered() {
			kp.group.slot = wire.Slot(k.key)
		}
	}
	return kp
}

// warnAt is when the work must hear that no extension came through: the
// warning lead before Until. now is time.Now.
func (kp *keeper) warnAt(now time.Time) time.Time {
	c := &kp.k.cfg
	return now.Add(kp.k.Until().Add(-c.warnLead()).Sub(c.clock.Now()))
}

// extendAt is when to extend: after from now, but no later than one node
// timeout before the warning, the last moment from which even a slow round
// ends in time.
func (kp *keeper) extendAt(now time.Time, after time.Duration) time.Time {
	c := &kp.k.cfg
	latest := kp.k.Until().Add(-c.warnLead() - c.nodeTimeout).Sub(c.clock.Now())
	return now.Add(max(min(after, latest), 0))
}

// nextAt is when the next extension is due after a successful one: when two
// thirds of the TTL are left before Until, about a third of the TTL after
// the last extension began.
func (kp *keeper) nextAt(now time.Time) time.Time {
	c := &kp.k.cfg
	return kp.extendAt(now, kp.k.Until().Add(-2*c.ttl/3).Sub(c.clock.Now()))
}

// retryAt is when to try again after a failed round (an outage): soon, so
// that several attempts fit before the warning, and spread out, so that the
// keys of a failed round do not all come back at once.
func (kp *keeper) retryAt(now time.Time) time.Time {
	retry := kp.k.cfg.ttl / 24
	return kp.extendAt(now, retry/2+rand.N(retry/2+1))
}

// window is how early an extension may go out, with an earlier one, to
// share its round: a thirty-second of the TTL.
func (kp *keeper) window() time.Duration { return kp.k.cfg.ttl / 32 }

// signal tells kp's work that the lock is lost with cause.
func (kp *keeper) signal(cause error) {
	kp.k.cfg.obs.lost(kp.ctx, kp.k, cause)
	kp.lose(cause)
}

// keeperHeap is a min-heap of keepers by at[h] (container/heap).
type keeperHeap struct {
	h     int
	items []*keeper
}

func (q *keeperHeap) Len() int { return len(q.items) }

func (q *keeperHeap) Less(i, j int) bool {
	return q.items[i].at[q.h].Before(q.items[j].at[q.h])
}

func (q *keeperHeap) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].idx[q.h] = i
	q.items[j].idx[q.h] = j
}

func (q *keeperHeap) Push(x any) {
	kp := x.(*keeper)
	kp.idx[q.h] = len(q.items)
	q.items = append(q.items, kp)
}

func (q *keeperHeap) Pop() any {
	n := len(q.items) - 1
	kp := q.items[n]
	q.items[n] = nil
	q.items = q.items[:n]
	kp.idx[q.h] = -1
	return kp
}
