package redlock

import (
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// lockKind is what tells a lock on one key from a lock on several, or a
// semaphore's permit (semaphore.go): the scripts its acquisition and its
// Lock run, and their arguments. It is chosen once, when the acquisition is
// made (newAcquisition, acquireKind), and the Lock keeps it; everything
// else (the retry loop, the waiter, the line, the wake-ups, the
// classification of failures) is the same for all.
type lockKind struct {
	// acquire is the acquire script, plan its keys and arguments for one
	// attempt (with a fresh token, or the caller's).
	acquire *scripts.Script
	plan    func(keys []string, cfg *config) acquirePlan
	// release, extend and pttl are the calls that a Lock of the kind
	// makes on every node, for its keys and its holder.
	release func(keys []string, h holder, announce bool, cooldownMs int64) scriptCall
	extend  func(keys []string, h holder, ttlMs int64, timeout time.Duration) scriptCall
	pttl    func(keys []string, h holder, timeout time.Duration) scriptCall
	// handoff says whether a Release may pass the lock to a waiter of the
	// same Locker in its own round (handoff.go).
	handoff bool
	// namesHolders says whether a call that gives up on contention names
	// the holders in its error (withHolders).
	namesHolders bool
	// line is the id of the Locker's line for the keys (gates).
	line func(keys []string) string
	// check rejects a call's options that the kind cannot have (nil: none).
	check func(cfg *config) error
	// chooseSlot, when set (a semaphore's slots, semaphore.go), picks from
	// an attempt's votes for several slot keys the one slot the attempt
	// takes, and rewrites the round into the votes for that slot; the
	// round then waits for every node's answer.
	chooseSlot func(a *acquisition, p *acquirePlan, g *granting)
	// stragglerCall, when set, returns the call to send to a node that
	// answered a won round late, and false when it needs none (settle).
	stragglerCall func(p *acquirePlan, r quorum.Reply[int64]) (scriptCall, bool)
	// heldAs, when set, is the kind of the Lock that an acquisition of
	// this kind hands out (a semaphore's permit, a reader's lease, the
	// writer's lock); unset, the Lock has this kind.
	heldAs *lockKind
	// extendAlone makes KeepAlive extend the Lock in a round of its own,
	// never batched with other locks.
	extendAlone bool
	// manyHolders says that several may hold a lock of the kind at once
	// (a semaphore's permits, a read-write lock's readers): the Locker's
	// line for its keys does not wait while one of its goroutines holds it.
	manyHolders bool
}

// scriptCall is one script and the keys and arguments it is called with.
type scriptCall struct {
	script *scripts.Script
	keys   []string
	args   []any
	// queue, when set, is the key that chooses the node's queue instead
	// of keys[0] (see conn.Call.Queue).
	queue string
	// shedding, if set, says when the call may be left unsent.
	shedding *shedding
}

// shedding says when a round's calls may be left unsent on a node whose
// queue still holds them (conn.Call.Shed): once flag is true, or (per
// node) once on[i] is; with expires, once a call has waited in its queue
// past the node timeout (conn.Call.Expires: acquisitions only). unsent[i]
// is set when node i's call is shed. A pointer in scriptCall, so that a
// round's nodeCall stays small enough for its closure to hold by value.
type shedding struct {
	flag       *atomic.Bool
	on, unsent []atomic.Bool
	expires    bool
}

// undo is the call that takes an attempt's own hold h off keys again. An
// attempt's undo announces nothing: no lock was held that anyone waits
// for, and waking waiters (the failed client among them) would only start
// another round. A failed handoff's undo is announced: the old owner's
// hold is gone too.
func (kd *lockKind) undo(keys []string, h holder, announce bool) scriptCall {
	return kd.release(keys, h, announce, 0)
}

// oneKey is the kind of a lock on one key (Obtain): the single-key
// scripts, whose arguments are those every earlier version sent.
var oneKey = lockKind{
	acquire: scripts.Acquire,
	plan:    newPlan,
	release: func(keys []string, h holder, announce bool, cooldownMs int64) scriptCall {
		channel := ""
		if announce {
			channel = releaseChannel(keys[0])
		}
		return scriptCall{script: scripts.Release, keys: keys, args: releaseArgs(h, channel, cooldownMs)}
	},
	extend: func(keys []string, h holder, ttlMs int64, timeout time.Duration) scriptCall {
		return scriptCall{script: scripts.Extend, keys: keys, args: extendArgs(keys[0], h, ttlMs, timeout)}
	},
	pttl: func(keys []string, h holder, timeout time.Duration) scriptCall {
		return scriptCall{script: scripts.PTTL, keys: keys, args: pttlArgs(keys[0], h, timeout)}
	},
	handoff:      true,
	namesHolders: true,
	line:         func(keys []string) string { return keys[0] },
}

// acquirePlan is what one attempt sends: a fresh token (or the caller's),
// the hold id of the Lock it may become, and the acquire script's keys and
// arguments.
type acquirePlan struct {
	token    string
	holder   holder
	keys     []string // the acquire script's KEYS
	lockKeys []string // the lock keys alone: what a release names
	args     []any
	// queue, if set, chooses the nodes' queue instead of keys[0] (see
	// scriptCall).
	queue string
}

// queueKey is the key that chooses the nodes' queue of the plan's
// acquisition.
func (p *acquirePlan) queueKey() string {
	if p.queue != "" {
		return p.queue
	}
	return p.keys[0]
}

// newPlan is the plan of an attempt on keys[0], the one key of the lock.
func newPlan(keys []string, cfg *config) acquirePlan {
	token, hold := planToken(cfg)
	value, h := wire.Value(token, hold, cfg.metadata)
	if !cfg.fencing && cfg.guard <= 0 {
		// The usual case: the acquisition's key slice, and the arguments
		// in one allocation.
		return acquirePlan{token: token, holder: h, keys: keys[:1], lockKeys: keys[:1], args: wire.AcquireArgs(value, serverMillis(cfg.serverTTL()), h)}
	}
	key := keys[0]
	marker, quarantine := cfg.guardKeys(key)
	all := []string{key, cfg.layout.FenceKey(key), marker, quarantine}
	return acquirePlan{token: token, holder: h, keys: all, lockKeys: all[:1], args: acquireArgs(value, h, cfg)}
}

// planToken is an attempt's token and hold id.
func planToken(cfg *config) (token, hold string) {
	if cfg.token == "" {
		// A fresh token per attempt: a straggler's clean-up from a failed
		// attempt can then never delete the key of a later one, and the
		// token alone tells this attempt's hold apart.
		return uuid.NewString(), "1"
	}
	// The caller's token may hold the key already, for another Lock: this
	// attempt's hold needs an id of its own.
	return cfg.token, newHoldID()
}

// acquireArgs are acquire.lua's seven arguments for value and holder h,
// then more (the arguments of a script that pastes acquire.lua in).
func acquireArgs(value string, h holder, cfg *config, more ...any) []any {
	fenced, start := fenceStart(cfg)
	return wire.AcquireFull{
		Value:      value,
		TTLMs:      serverMillis(cfg.serverTTL()),
		Holder:     h,
		Fenced:     fenced,
		GuardMs:    serverMillis(cfg.guard),
		LifetimeMs: serverMillis(cfg.fenceLifetime()),
		Start:      start,
	}.Args(more...)
}

// fenceStart is acquire.lua's fencing flag and the start it offers every
// node for a counter (ARGV[4] and ARGV[7]).
//
// The start is this machine's clock in µs, fenceStartLag back and rounded
// down to fenceStartStep: the same on all nodes of an attempt, so that
// they answer the same fence although their own clocks' 100 ms windows
// may turn between their grants (each then needs no write-back). A node
// takes it only where it lies within its own last 200 ms; the lag is the
// allowance for a server's clock behind this one. The rounding, to the
// servers' own 100 ms grid, lets a busy key's grants count on by one
// (INCR) between starts: a new start costs each node a write of the
// counter with its expiry, which at 10 ms steps most grants of a busy key
// paid.
func fenceStart(cfg *config) (fenced bool, start int64) {
	if !cfg.fencing {
		return false, 0
	}
	us := cfg.clock.Now().Add(-fenceStartLag).UnixMicro()
	return true, us - us%fenceStartStep
}

// acquireStartArg is the index of the counter's start in acquireArgs.
const acquireStartArg = wire.AcquireStartArg

// fenceStartLag and fenceStartStep (µs) shape fenceStart's start.
const (
	fenceStartLag  = 10 * time.Millisecond
	fenceStartStep = 100_000
)
