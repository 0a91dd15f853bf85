package redlock

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/quorumlock/redlock/redlock/internal/scripts"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Multi-key locks: several keys taken as one lock. On each node the keys are
// taken in one script, all or none (acquire_multi.lua), so an attempt never
// holds some keys while it waits for others: two callers whose key sets
// overlap, given in any order, cannot deadlock; at worst their votes split,
// both undo and retry after a jittered delay, as two single-key callers do.
// The lock is one Lock: one token, one validity, and one round per
// Release, Extend or TTL that acts on all its keys on each node (multi.lua).
// What differs from a lock on one key is its kind, manyKeys, alone. All of
// a key set's calls go on the node queue of its smallest key, whatever the
// order the keys were given in: an attempt on [b a] cannot overtake the
// acquisition, or the release, of [a b] still on its way to a node (and
// find its keys held there, or take them first).

// MaxMultiKeys bounds a multi-key lock's keys (one script takes them all).
const MaxMultiKeys = 64

// Keys returns the lock's keys: the one key of a lock from Obtain, every key
// of one from ObtainMulti, in the order given.
func (k *Lock) Keys() []string { return slices.Clone(k.keys) }

// multi reports whether the lock holds several keys.
func (k *Lock) multi() bool { return len(k.keys) > 1 }

// manyKeys is the kind of a lock on several keys (ObtainMulti): the keys
// are taken by acquire_multi.lua, and released, extended or read by
// multi.lua, which runs the single-key script for each key. It is never
// handed over (handoff.lua takes one key), and a call that gives up does
// not name the holders (each node may refuse for another key).
var manyKeys = lockKind{
	acquire: scripts.AcquireMulti,
	plan:    newMultiPlan,
	release: func(keys []string, h holder, announce bool, cooldownMs int64) scriptCall {
		// Each key's release is announced on its own channel; a release
		// needs no nonce (once.lua): a second copy finds our hold gone.
		prefix := ""
		if announce {
			prefix = releasePrefix
		}
		return scriptCall{script: scripts.Multi, keys: keys, args: []any{"release", h.Prefix, prefix, cooldownMs, h.Hold, "", 0}, queue: slices.Min(keys)}
	},
	extend: func(keys []string, h holder, ttlMs int64, timeout time.Duration) scriptCall {
		return scriptCall{script: scripts.Multi, keys: keys, args: append([]any{"extend"}, extendArgs(keys[0], h, ttlMs, timeout)...), queue: slices.Min(keys)}
	},
	pttl: func(keys []string, h holder, timeout time.Duration) scriptCall {
		return scriptCall{script: scripts.Multi, keys: keys, args: append([]any{"pttl"}, pttlArgs(keys[0], h, timeout)...), queue: slices.Min(keys)}
	},
	line:  multiLine,
	check: multiOptions,
}

// multiLine is the id of the Locker's line for a set of keys: the same for
// the same keys in any order, and never a lock key (it starts with
// ReservedPrefix), so that a multi-key lock lines up with the goroutines
// that want the same keys, and with no single-key caller.
func multiLine(keys []string) string {
	sorted := slices.Sorted(slices.Values(keys))
	var b strings.Builder
	b.WriteString(ReservedPrefix + "multi:")
	for _, key := range sorted {
		b.WriteString(strconv.Itoa(len(key)))
		b.WriteByte(':')
		b.WriteString(key)
	}
	return b.String()
}

// multiOptions rejects the options of a multi-key call that a multi-key
// lock cannot have.
func multiOptions(cfg *config) error {
	switch {
	case cfg.tokenSet:
		return invalid("WithToken takes one key: a multi-key lock is never a re-entry")
	case cfg.fencing:
		return invalid("WithFencing takes one key: a multi-key lock has no fencing token")
	}
	return nil
}

// ObtainMulti acquires one lock on all of keys together, or on none, as
// Obtain does for one key (retries, waiting woken by any key's release,
// errors); callers with overlapping key sets, in any order, never deadlock.
// The lock has one token and one validity; Release, Extend, KeepAlive and
// TTL act on all its keys, and Key is the keys joined by commas. An empty
// list, more than MaxMultiKeys keys, a key given twice, WithToken or
// WithFencing is an ErrInvalid (docs/safety.md#multi-key-locks). As Obtain,
// it takes a read-write lock's writer key without looking at its readers'
// leases (RWMutex.Lock does).
func (l *Locker) ObtainMulti(ctx context.Context, keys []string, opts ...LockOption) (*Lock, error) {
	return l.acquire(ctx, slices.Clone(keys), opts, false)
}

// TryObtainMulti is ObtainMulti with exactly one attempt.
func (l *Locker) TryObtainMulti(ctx context.Context, keys []string, opts ...LockOption) (*Lock, error) {
	return l.acquire(ctx, slices.Clone(keys), opts, true)
}

// newMultiPlan is newPlan for several keys: acquire_multi.lua's keys and
// arguments, with a fresh token.
func newMultiPlan(keys []string, cfg *config) acquirePlan {
	value, h := wire.Value(uuid.NewString(), "1", cfg.metadata)
	all := slices.Clone(keys)
	args := append([]any{len(keys)}, wire.AcquireArgs(value, serverMillis(cfg.serverTTL()), h)...)
	if cfg.guard > 0 {
		marker, quarantine := cfg.guardKeys(keys[0])
		all = append(all, marker, quarantine)
		args = append(args, "0", serverMillis(cfg.guard), serverMillis(cfg.fenceLifetime()))
	}
	return acquirePlan{token: h.Token(), holder: h, keys: all, lockKeys: all[:len(keys)], args: args, queue: slices.Min(keys)}
}
