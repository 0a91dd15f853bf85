package redlock

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
	"github.com/quorumlock/redlock/redlock/internal/wire"
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

// Semaphore is a counting semaphore over the nodes (docs/safety.md#semaphores).
// Safe for concurrent use.
type Semaphore struct {
	l *Locker
	// kind is the semaphore's acquisition, permit the kind of the Locks
	// it gives: both know the semaphore's slots.
	kind, permit lockKind
	name         string
	size         int
}

// Semaphore returns the semaphore name (a lock key) of size permits, 1 to
// MaxSemaphoreSize; a bad one, or another size than its live permits', is
// an ErrInvalid of its calls.
func (l *Locker) Semaphore(name string, size int) *Semaphore {
	s := &Semaphore{l: l, kind: slotKind, permit: permitKind, name: name, size: size}
	s.kind.line = func([]string) string { return wire.Sem(name) }
	s.kind.heldAs = &s.permit
	s.permit.release = func(keys []string, h holder, announce bool, cooldownMs int64) scriptCall {
		channel := ""
		if announce {
			channel = releaseChannel(wire.Sem(name))
		}
		return semRelease(keys[0], s.slots(), h, channel, cooldownMs)
	}
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
	acquire:       scripts.AcquireSlot,
	release:       undoSlots,
	chooseSlot:    decideSlot,
	stragglerCall: straySlot,
	heldAs:        &permitKind,
	manyHolders:   true,
}

// slots are the semaphore's slot keys, in order.
func (s *Semaphore) slots() []string {
	keys := make([]string, s.size)
	for j := range keys {
		keys[j] = s.l.cfg.layout.SemSlot(s.name, j)
	}
	return keys
}

// undoSlots takes an attempt's hold h off the slot keys, all of its
// semaphore's (it announces nothing: no permit was held).
func undoSlots(keys []string, h holder, _ bool, cooldownMs int64) scriptCall {
	return semCall(keys, len(keys), h, "", cooldownMs)
}

// semRelease takes hold h off slot (a permit's release, or the undo of a
// grant of that slot alone) with its semaphore's slots all, announcing on
// channel unless it is "".
func semRelease(slot string, all []string, h holder, channel string, cooldownMs int64) scriptCall {
	keys, m := releasedFirst(all, func(k string) bool { return k == slot })
	return semCall(keys, m, h, channel, cooldownMs)
}

// releasedFirst orders a semaphore's slots all for semCall: those that
// released says to take the hold off first, then the others (read for the
// size key's life only), and says how many come first.
func releasedFirst(all []string, released func(string) bool) ([]string, int) {
	keys := make([]string, 0, len(all))
	for _, k := range all {
		if released(k) {
			keys = append(keys, k)
		}
	}
	m := len(keys)
	for _, k := range all {
		if !released(k) {
			keys = append(keys, k)
		}
	}
	return keys, m
}

// semCall is sem_release.lua's call: hold h taken off slots[:m], and the
// size key made to live as long as the slots.
func semCall(slots []string, m int, h holder, channel string, cooldownMs int64) scriptCall {
	keys := make([]string, 0, len(slots)+1)
	keys = append(append(keys, wire.SizeOfSlot(slots[0])), slots...)
	args := append(releaseArgs(h, channel, cooldownMs), m, strconv.Itoa(len(slots)))
	return onSemQueue(scriptCall{script: scripts.SemRelease, keys: keys, args: args}, slots[0])
}

// onSemQueue sends c, a call on slot keys, on the queue of the attempts
// (their first key is the size key): an attempt's undo of a slot then
// reaches each node before the next attempt, which it would otherwise find
// refused by that very grant, and a permit's release before the same
// Locker's next attempt.
func onSemQueue(c scriptCall, slot string) scriptCall {
	c.queue = wire.SizeOfSlot(slot)
	return c
}

// permitKind is the kind of a permit: a lock on one slot key whose release
// wakes the whole semaphore's waiters, and whose release, cooldown and
// Extend keep the size key alive exactly as long as the slots (so it is
// extended alone, never batched). Each Semaphore sets its release, which
// needs all of its slots.
var permitKind = lockKind{
	extend: func(keys []string, h holder, ttlMs int64, timeout time.Duration) scriptCall {
		return onSemQueue(scriptCall{script: scripts.ExtendSlot, keys: []string{keys[0], wire.SizeOfSlot(keys[0])}, args: extendArgs(keys[0], h, ttlMs, timeout)}, keys[0])
	},
	pttl:        oneKey.pttl,
	line:        func(keys []string) string { return wire.SemOfSlot(keys[0]) },
	extendAlone: true,
}

// newSlotPlan is an attempt on semaphore name of size: a fresh token, and
// the slots in a random rotation, the same for every node, so that nodes
// in the same state grant the same slot while concurrent attempts usually
// start on different ones.
func newSlotPlan(name string, size int, cfg *config) acquirePlan {
	value, h := wire.Value(uuid.NewString(), "1", cfg.metadata)
	keys := make([]string, 3, 3+2*size)
	keys[0] = cfg.layout.SemSize(name)
	keys[1], keys[2] = cfg.guardKeys(name)
	first := rand.IntN(size)
	for j := range size {
		keys = append(keys, cfg.layout.SemSlot(name, (first+j)%size))
	}
	if cfg.fencing {
		for j := range size {
			keys = append(keys, cfg.layout.FenceKey(keys[3+j]))
		}
	}
	args := append([]any{size, quoteKey(name)}, acquireArgs(value, h, cfg)...)
	return acquirePlan{token: h.Token(), holder: h, keys: keys, lockKeys: keys[3 : 3+size], args: args}
}

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

// decideSlot turns a slot round, which waited for every node's answer
// (or the node timeout), into a one-key round. A node that says the
// semaphore has another size fails the attempt with ErrInvalid, whatever
// the other nodes said and in whatever order they said it: every answer
// is in before the round is decided. Otherwise the lock is the slot
// granted by a majority, whose grants keep their fence as value; every
// other grant is undone at once and counts as a refusal, and a node whose
// answer was an error may have granted any slot, so every other slot is
// undone there too. When no slot has a majority, the grants stay votes
// for the attempt, so that the round is classified as a lock on one key
// that some nodes granted is, and conclude undoes them all.
func decideSlot(a *acquisition, p *acquirePlan, g *granting) {
	l, fenced := a.l, a.cfg.fencing
	slots := p.lockKeys
	best, count := slotVotes(&g.res, fenced)
	won := count >= l.need
	for i := range g.res.Replies {
		if size, ok := otherSize(g.res.Replies[i].Err); ok {
			g.reason = &SizeError{Name: wire.Name(slots[0]), Size: size, Want: p.args[0].(int)}
			won = false
		}
	}
	if !won {
		// As for one key: contention when the best slot could not have
		// had a majority even had every node that failed granted it.
		if g.reason == nil && count+len(g.res.Replies)-g.res.Yes-g.res.No < l.need {
			g.reason = ErrNotObtained
		}
		g.res.OK = false
		return
	}
	for i := range g.res.Replies {
		r := &g.res.Replies[i]
		switch {
		case r.Vote == quorum.Yes:
			pos, fence := slotOf(r.Value, fenced)
			if pos == best {
				r.Value = fence
				continue
			}
			l.sendOn(i, a.cfg.nodeTimeout, semRelease(slots[pos], slots, p.holder, "", 0))
			r.Vote, r.Value = quorum.No, 0
			g.res.Yes--
			g.res.No++
		case mustUndo(*r):
			l.sendOn(i, a.cfg.nodeTimeout, undoOthers(slots, slots[best], p.holder))
		}
	}
	p.lockKeys = slots[best : best+1]
}

// undoOthers takes hold h off every slot of all but won.
func undoOthers(all []string, won string, h holder) scriptCall {
	keys, m := releasedFirst(all, func(k string) bool { return k != won })
	return semCall(keys, m, h, "", 0)
}

// straySlot is what a straggler of a won slot round needs (one that
// answered after the node timeout): a grant of another slot is undone; a
// node that failed may have granted any slot, so the attempt's hold is
// taken off all but the won one.
func straySlot(p *acquirePlan, r quorum.Reply[int64]) (scriptCall, bool) {
	slots, won, fenced := p.keys[3:3+p.args[0].(int)], p.lockKeys[0], p.args[5] == "1"
	switch {
	case r.Vote == quorum.Yes:
		pos, _ := slotOf(r.Value, fenced)
		if slots[pos] != won {
			return semRelease(slots[pos], slots, p.holder, "", 0), true
		}
	case mustUndo(r) && len(slots) > 1:
		return undoOthers(slots, won, p.holder), true
	}
	return scriptCall{}, false
}
