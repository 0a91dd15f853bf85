package redlock

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/quorumlock/redlock/redlock/internal/scripts"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Read-write locks (docs/safety.md#read-write-locks). The writer holds the
// lock key name itself; each reader holds a lease of its own, a lock key
// with its token in its name, listed in the lock's index of leases. On
// every node, a reader's lease is refused while the writer key (or a
// waiting writer's mark) exists, and the writer key while a lease exists,
// each in one script: at any moment a node holds leases or the writer key,
// never both. A reader and a writer that both hold a majority share a node
// where both keys would live at once, so the mutex's proof carries over
// as it is. What differs from a lock on one key is the kind alone.

// RWMutex is a read-write lock (docs/safety.md#read-write-locks). Its
// writer holds the key name itself. Safe for concurrent use.
type RWMutex struct {
	l                     *Locker
	name                  string
	read, write, tryWrite lockKind
}

// RWMutex returns the read-write lock on name, a lock key; a bad one is
// an ErrInvalid of its calls.
func (l *Locker) RWMutex(name string) *RWMutex {
	m := &RWMutex{l: l, name: name}
	line := func([]string) string { return name }
	check := func(cfg *config) error { return checkKey(name) }
	m.read = lockKind{
		acquire:     scripts.RWRead,
		plan:        func(_ []string, cfg *config) acquirePlan { return newReadPlan(name, cfg) },
		release:     readLease.release,
		line:        line,
		heldAs:      &readLease,
		manyHolders: true,
		check: func(cfg *config) error {
			if cfg.tokenSet {
				return invalid("WithToken takes a lock key: a reader's lease is never a re-entry")
			}
			return check(cfg)
		},
	}
	m.write = lockKind{
		acquire: scripts.RWWrite,
		plan:    func(_ []string, cfg *config) acquirePlan { return newWritePlan(name, true, cfg) },
		release: oneKey.release,
		line:    line,
		heldAs:  &oneKey,
		check:   check,
	}
	m.tryWrite = m.write
	m.tryWrite.plan = func(_ []string, cfg *config) acquirePlan { return newWritePlan(name, false, cfg) }
	return m
}

// RLock takes a reader's lease, a Lock of its own, waiting and failing as
// Locker.Obtain; WithToken is an ErrInvalid. As sync.RWMutex, a recursive
// RLock behind a waiting writer waits for that writer (until ctx ends).
func (m *RWMutex) RLock(ctx context.Context, opts ...LockOption) (*Lock, error) {
	return m.l.acquireKind(ctx, &m.read, opts, false)
}

// TryRLock makes exactly one attempt at RLock.
func (m *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (*Lock, error) {
	return m.l.acquireKind(ctx, &m.read, opts, true)
}

// Lock takes the writer's lock, waiting and failing as Locker.Obtain; while
// it waits for readers to leave, new readers wait too. As sync.RWMutex, it
// is no upgrade: a caller that holds a lease of the same lock waits for its
// own lease until ctx ends. Only Lock and TryLock look at leases: Obtain,
// ObtainMulti and Campaign of name take the writer key without doing so.
func (m *RWMutex) Lock(ctx context.Context, opts ...LockOption) (*Lock, error) {
	return m.l.acquireKind(ctx, &m.write, opts, false)
}

// TryLock makes exactly one attempt at Lock.
func (m *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (*Lock, error) {
	return m.l.acquireKind(ctx, &m.tryWrite, opts, true)
}

// readLease is the kind of a reader's lease: its release and extension
// keep the index of leases alive as long as the lease (so it is extended
// alone, never batched), and wake the read-write lock's waiters.
var readLease = lockKind{
	release: func(keys []string, h holder, announce bool, cooldownMs int64) scriptCall {
		channel := ""
		if announce {
			channel = releaseChannel(rwName(keys[0]))
		}
		return scriptCall{script: scripts.RWRelease, keys: []string{keys[0], rwIndex(keys[0])}, args: releaseArgs(h, channel, cooldownMs), queue: rwName(keys[0])}
	},
	extend: func(keys []string, h holder, ttlMs int64, timeout time.Duration) scriptCall {
		return scriptCall{script: scripts.ExtendSlot, keys: []string{keys[0], rwIndex(keys[0])}, args: extendArgs(keys[0], h, ttlMs, timeout), queue: rwName(keys[0])}
	},
	pttl: func(keys []string, h holder, timeout time.Duration) scriptCall {
		c := oneKey.pttl(keys, h, timeout)
		c.queue = rwName(keys[0])
		return c
	},
	line:        func(keys []string) string { return rwName(keys[0]) },
	extendAlone: true,
	manyHolders: true,
}

// newReadPlan is an attempt at a reader's lease of name: a fresh token,
// which names the lease.
func newReadPlan(name string, cfg *config) acquirePlan {
	p := fullPlan(uuid.NewString(), "1", cfg)
	ly := cfg.layout
	marker, quarantine := cfg.guardKeys(name)
	p.keys = []string{ly.RWLease(name, p.token), ly.FenceKey(name), marker, quarantine, name, ly.RWMark(name), ly.RWIndex(name)}
	p.lockKeys = p.keys[:1]
	// On the writer's queue, as all of the lock's calls: a reader's
	// release, or an attempt's undo, is not overtaken by the writer's
	// next attempt from the same Locker.
	p.queue = name
	return p
}

// markMargin, and two node timeouts, is how long a waiting writer's mark
// outlives the readers' leases it waits for: time for the writer to come
// back when the last one goes (rw_write.lua).
const markMargin = 500 * time.Millisecond

// newWritePlan is an attempt at the writer key name, a waiting writer's
// (mark) or a single attempt's.
func newWritePlan(name string, mark bool, cfg *config) acquirePlan {
	token, hold := planToken(cfg)
	var margin time.Duration
	if mark {
		margin = markMargin + 2*cfg.nodeTimeout
	}
	p := fullPlan(token, hold, cfg, serverMillis(margin))
	ly := cfg.layout
	marker, quarantine := cfg.guardKeys(name)
	p.keys = []string{name, ly.FenceKey(name), marker, quarantine, ly.RWIndex(name), ly.RWMark(name)}
	p.lockKeys = p.keys[:1]
	return p
}

// fullPlan is a plan's token, holder and arguments: acquire.lua's seven for
// token and hold, then more; the caller adds the keys.
func fullPlan(token, hold string, cfg *config, more ...any) acquirePlan {
	value, h := wire.Value(token, hold, cfg.metadata)
	return acquirePlan{token: token, holder: h, args: acquireArgs(value, h, cfg, more...)}
}

// rwName is the read-write lock's name (its writer key) of a lease key;
// rwIndex is its index of leases.
func rwName(lease string) string { return wire.RWOfLease(lease) }

func rwIndex(lease string) string { return wire.IndexOfLease(lease) }
