package redlock

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// Semaphores: a permit is a mutex on one of size slot keys, so it inherits
// the mutex's proof (docs/safety.md#semaphores). An attempt sends every
// node the slots in one random rotation, and each node grants the first
// free one (acquire_slot.lua, acquire.lua pasted into it); the attempt wins
// slot s when a majority granted s, and undoes every other grant. What
// differs from a lock on one key is the kind alone (slotKind): its plan,
// its round's decision (decideSlot) and its permits' kind (permitKind).

// MaxSemaphoreSize bounds a semaphore's size (an attempt sends all slots).
const MaxSemaphoreSize = 1000

// semPrefix starts a semaphore's keys: its slots (semPrefix + name + ":"
// + index) and its size key (semPrefix + name + ":size").
const semPrefix = ReservedPrefix + "sem:"

// Semaphore is a counting semaphore over the nodes (docs/safety.md#semaphores).
// Safe for concurrent use.
type Semaphore struct {
	l    *Locker
	kind lockKind
	name string
	size int
}

// Semaphore returns the semaphore name (a lock key) of size permits, 1 to
// MaxSemaphoreSize; a bad one, or another size than its live permits', is
// an ErrInvalid of its calls.
func (l *Locker) Semaphore(name string, size int) *Semaphore {
	s := &Semaphore{l: l, kind: slotKind, name: name, size: size}
	s.kind.line = func([]string) string { return semPrefix + name }
	s.kind.plan = func(_ []string, cfg *config) acquirePlan { return newSlotPlan(name, size, cfg) }
	s.kind.check = func(cfg *config) error {
		if err := checkKey(name); err != nil {
			return err
		}
		switch {
		case size < 1 || size > MaxSemaphoreSize:
			return invalid("semaphore %s: size %d is not between 1 and %d", quoteKey(name), size, MaxSemaphoreSize)
		case cfg.tokenSet:
			return invalid("WithToken takes a lock key: a permit is never a re-entry")
		}
		return nil
	}
	return s
}

// Obtain takes a permit, waiting and failing as Locker.Obtain (woken by any
// permit's release). The permit is a Lock on one slot (Key), its Fence
// growing per slot; WithToken is an ErrInvalid.
func (s *Semaphore) Obtain(ctx context.Context, opts ...LockOption) (*Lock, error) {
	return s.l.acquireKind(ctx, &s.kind, opts, false)
}

// TryObtain makes exactly one attempt to take a permit: ErrNotObtained
// when all are held; otherwise as Obtain.
func (s *Semaphore) TryObtain(ctx context.Context, opts ...LockOption) (*Lock, error) {
	return s.l.acquireKind(ctx, &s.kind, opts, true)
}

// slotKind is a semaphore's acquisition: its plan and check are set per
// Semaphore. Its undo takes the attempt's hold off every slot (multi.lua);
// its Locker line and wake-ups are the semaphore's, not a slot's.
var slotKind = lockKind{
	acquire: scripts.AcquireSlot,
	release: undoSlots,
	decide:  decideSlot,
	stray:   straySlot,
	permit:  &permitKind,
	shared:  true,
}

// undoSlots takes an attempt's hold h off the slot keys (it announces
// nothing: no permit was held).
func undoSlots(keys []string, h holder, _ bool, cooldownMs int64) scriptCall {
	return onSemQueue(scriptCall{script: scripts.Multi, keys: keys, args: []any{"release", h.prefix, "", cooldownMs, h.hold, "", 0}})
}

// onSemQueue sends c, a call on slot keys, on the queue of the attempts
// (their first key is the size key): an attempt's undo of a slot then
// reaches each node before the next attempt, which it would otherwise find
// refused by that very grant, and a permit's release before the same
// Locker's next attempt.
func onSemQueue(c scriptCall) scriptCall {
	c.queue = semOf(c.keys[0]) + ":size"
	return c
}

// permitKind is the kind of a permit: a lock on one slot key whose release
// wakes the whole semaphore's waiters and whose Extend keeps the size key
// alive as long as the slot (so it is extended alone, never batched).
var permitKind = lockKind{
	release: func(keys []string, h holder, announce bool, cooldownMs int64) scriptCall {
		channel := ""
		if announce {
			channel = releaseChannel(semOf(keys[0]))
		}
		return onSemQueue(scriptCall{script: scripts.Release, keys: keys, args: releaseArgs(h, channel, cooldownMs)})
	},
	extend: func(keys []string, h holder, ttlMs int64, timeout time.Duration) scriptCall {
		return onSemQueue(scriptCall{script: scripts.ExtendSlot, keys: []string{keys[0], semOf(keys[0]) + ":size"}, args: extendArgs(h, ttlMs, timeout)})
	},
	pttl:  oneKey.pttl,
	line:  func(keys []string) string { return semOf(keys[0]) },
	alone: true,
}

// semOf is the semaphore key (semPrefix + name) of a slot key.
func semOf(slot string) string { return slot[:strings.LastIndexByte(slot, ':')] }

// newSlotPlan is an attempt on semaphore name of size: a fresh token, and
// the slots in a random rotation, the same for every node, so that nodes
// in the same state grant the same slot while concurrent attempts usually
// start on different ones.
func newSlotPlan(name string, size int, cfg *config) acquirePlan {
	prefix := uuid.NewString() + "\x00"
	sem := semPrefix + name
	keys := make([]string, 3, 3+2*size)
	keys[0], keys[1], keys[2] = sem+":size", guardMarker, guardQuarantine
	first := rand.IntN(size)
	for j := range size {
		keys = append(keys, sem+":"+strconv.Itoa((first+j)%size))
	}
	if cfg.fencing {
		for j := range size {
			keys = append(keys, fenceKey(keys[3+j]))
		}
	}
	h := holder{prefix: prefix, hold: "1"}
	args := append([]any{size, quoteKey(name)}, acquireArgs(prefix+"1\x00"+cfg.metadata, h, cfg)...)
	return acquirePlan{token: strings.TrimSuffix(prefix, "\x00"), holder: h, keys: keys, lockKeys: keys[3 : 3+size], args: args}
}

// exclusive reports whether a lock got from the waiter's line keeps the rest
// of the line waiting (heldHere): not a shared kind's (a permit, a lease),
// as others may be free.
func (w *waiter) exclusive() bool { return w.inLine() && !w.a.kind.shared }

// slotOf splits a granting reply's value into the position of its slot in
// the plan's rotation and its fence.
func slotOf(v int64, fenced bool) (pos int, fence int64) {
	if fenced {
		return int(v % 1000), v / 1000
	}
	return int(v), 0
}

// slotVotes counts a round's grants per slot position and returns the
// position granted most and its count.
func slotVotes(res *quorum.Result[int64], fenced bool) (best, count int) {
	counts := map[int]int{}
	for _, r := range res.Replies {
		if r.Vote == quorum.Yes {
			pos, _ := slotOf(r.Value, fenced)
			counts[pos]++
			if c := counts[pos]; c > count || (c == count && pos < best) {
				best, count = pos, c
			}
		}
	}
	return best, count
}

// slotDecided reports whether a slot round is decided: a slot has need
// grants, or none can get them from the nodes still silent and those could
// no longer tell contention from outage (as quorum.Round's Classify; a
// grant of another slot counts as a refusal, as decideSlot makes it).
func slotDecided(res *quorum.Result[int64], need int, fenced bool) bool {
	_, count := slotVotes(res, fenced)
	pending := res.Pending()
	if count >= need || count+pending >= need {
		return count >= need
	}
	spare, refused := len(res.Replies)-need, res.No+res.Yes-count
	return refused > spare || refused+pending <= spare
}

// decideSlot turns a slot round into a one-key round: the lock is the slot
// granted by a majority, whose grants keep their fence as value; every
// other grant is undone at once and counts as a refusal (contention). A
// node's INVALID error (another size) fails the attempt with ErrInvalid.
func decideSlot(a *acquisition, p *acquirePlan, g *granting) {
	l, fenced := a.l, a.cfg.fencing
	best, count := slotVotes(&g.res, fenced)
	won := count >= l.need
	for i := range g.res.Replies {
		r := &g.res.Replies[i]
		if r.Err != nil && strings.Contains(r.Err.Error(), "INVALID semaphore") {
			g.reason = invalid("%s", r.Err.Error())
			g.res.OK = false
		}
		if r.Vote != quorum.Yes {
			continue
		}
		pos, fence := slotOf(r.Value, fenced)
		if won && pos == best {
			r.Value = fence
			continue
		}
		l.sendOn(i, a.cfg.nodeTimeout, onSemQueue(oneKey.release(p.lockKeys[pos:pos+1], p.holder, false, 0)))
		r.Vote, r.Value = quorum.No, 0
		g.res.Yes--
		g.res.No++
	}
	if won {
		p.lockKeys = p.lockKeys[best : best+1]
	} else {
		g.res.OK = false
	}
}

// straySlot is what a straggler of a won slot round needs: a grant of
// another slot is undone; a node that failed may have granted any slot,
// so the attempt's hold is taken off all but the won one.
func straySlot(p *acquirePlan, r quorum.Reply[int64]) (scriptCall, bool) {
	slots, won, fenced := p.keys[3:3+p.args[0].(int)], p.lockKeys[0], p.args[5] == "1"
	switch r.Vote {
	case quorum.Yes:
		pos, _ := slotOf(r.Value, fenced)
		if slots[pos] != won {
			return onSemQueue(oneKey.release(slots[pos:pos+1], p.holder, false, 0)), true
		}
	case quorum.Failed:
		others := make([]string, 0, len(slots))
		for _, s := range slots {
			if s != won {
				others = append(others, s)
			}
		}
		if len(others) > 0 {
			return undoSlots(others, p.holder, false, 0), true
		}
	}
	return scriptCall{}, false
}
