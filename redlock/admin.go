package redlock

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/scripts"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Status is what the nodes know of a lock, from Inspect.
type Status struct {
	Key    string       // the lock key
	Holder string       // the token that holds the key on a majority of nodes, or ""
	Nodes  []NodeStatus // one per node, in the clients' order
}

// NodeStatus is one node's view of a lock; the holder's fields need Held.
type NodeStatus struct {
	Addr     string        // the node's address, credentials removed
	Held     bool          // the key exists on the node
	Token    string        // the holder's token
	Metadata string        // the holder's metadata
	Holds    int           // the Locks that hold it: 1, more after re-entries, 0 in a cooldown
	TTL      time.Duration // the key's time left (-1: no expiry)
	Fence    uint64        // the node's fencing counter: the latest fence it granted or saw (0: none)
	Err      error         // why the node could not be asked, or nil

	// confirmed is the fence that the one hold on the key wrote back here
	// (see fence.lua), 0 when none did: a leader's term, once confirmed.
	confirmed uint64
}

// Inspect asks every node what it holds for key, and returns the status
// even with ErrNoQuorum (under a majority answered) or ErrInvalid (two nodes
// reach one server); a bad key is an ErrInvalid with no status, asking none.
func (l *Locker) Inspect(ctx context.Context, key string) (*Status, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	st, _, err := l.inspect(ctx, key, "")
	return st, err
}

// inspect is Inspect of any lock key, a permit's or a lease's too, with
// its fencing counter (wire.Layout.CounterOf). With an index of leases, it also
// returns the leases any node lists in it.
func (l *Locker) inspect(ctx context.Context, key, index string) (*Status, []string, error) {
	release, err := l.guard()
	if err != nil {
		return nil, nil, err
	}
	defer release()
	st := &Status{Key: key, Nodes: make([]NodeStatus, len(l.nodes))}
	keys := []string{key, l.cfg.layout.CounterOf(key)}
	if index != "" {
		keys = append(keys, index)
	}
	var (
		mu     sync.Mutex
		final  bool // set once the round is decided: a straggler's answer is dropped
		leases = map[string]bool{}
	)
	timeout := l.cfg.nodeTimeout
	// One answer per server (callNonce): a server reached through two node
	// addresses must not show a holder twice.
	nonce, keep := callNonce(key, timeout)
	inspect := scriptCall{script: scripts.Inspect, keys: keys, args: []any{nonce, keep}}
	l.askNodes(ctx, timeout, inspect, nil, func(i int, got *redis.Cmd) {
		ns, listed := inspectReply(l.nodes[i].addr, got)
		mu.Lock()
		defer mu.Unlock()
		if !final {
			st.Nodes[i] = ns
			for _, k := range listed {
				leases[k] = true
			}
		}
	})
	mu.Lock()
	final = true
	mu.Unlock()
	listed := slices.Sorted(maps.Keys(leases))
	return st, listed, l.inspectVerdict(ctx, key, st)
}

// ForceRelease deletes key's lock on every node, whoever holds it, and
// wakes its waiters; an owner still alive finds its lock lost at its next
// extension, with an error that says force-released (a note left on each
// node tells owners in other processes, for the TTL the hold had left and
// a minute). It fails with ErrNoQuorum when fewer than a majority could be
// reached, and with ErrInvalid, asking no node, for a key Obtain rejects.
func (l *Locker) ForceRelease(ctx context.Context, key string) (err error) {
	if err := checkKey(key); err != nil {
		return l.forceFailed(ctx, key, err)
	}
	return l.forceRelease(ctx, key, []string{key}, 0)
}

// ForceRelease deletes every permit of the semaphore on every node,
// whoever holds them, and its size key, and wakes its waiters; as
// Locker.ForceRelease otherwise.
func (s *Semaphore) ForceRelease(ctx context.Context) error {
	if err := s.kind.check(&s.l.cfg); err != nil {
		return s.l.forceFailed(ctx, wire.Sem(s.name), err)
	}
	return s.l.forceRelease(ctx, wire.Sem(s.name), append([]string{s.l.cfg.layout.SemSize(s.name)}, s.slots()...), 0)
}

// ForceRelease deletes the read-write lock's writer key and every
// reader's lease on every node, whoever holds them, with the lock's index
// of leases and a waiting writer's mark, and wakes its waiters; as
// Locker.ForceRelease otherwise.
func (m *RWMutex) ForceRelease(ctx context.Context) error {
	if err := checkKey(m.name); err != nil {
		return m.l.forceFailed(ctx, m.name, err)
	}
	return m.l.forceRelease(ctx, m.name, []string{m.name, m.l.cfg.layout.RWMark(m.name), m.l.cfg.layout.RWIndex(m.name)}, 3)
}

// forceFailed is the error of a ForceRelease of name that asked no node,
// observed as any ForceRelease.
func (l *Locker) forceFailed(ctx context.Context, name string, err error) error {
	ctx, tr := l.cfg.obs.begin(ctx, OpForceRelease, name)
	tr.done(ctx, err)
	return err
}

// forceRelease deletes keys on every node, announcing the release of
// name's lock, with the members of the index of leases at position index
// of keys (1-based; 0 for none): force.lua.
func (l *Locker) forceRelease(ctx context.Context, name string, keys []string, index int) (err error) {
	ctx, tr := l.cfg.obs.begin(ctx, OpForceRelease, name)
	defer func() { tr.done(ctx, err) }()
	// Logged before any node deletes: a Lock of this Locker that then
	// finds its key gone is told it was released, not that it expired.
	for _, k := range keys {
		l.forced.note(k)
	}
	// Each removed hold leaves a note for its holder (see Lock.notHeld).
	args := []any{releaseChannel(name), l.cfg.layout.ForcedPrefix(keys[0]), forcedGrace.Milliseconds()}
	if index > 0 {
		args = append(args, index)
	}
	timeout := l.cfg.nodeTimeout
	res, err := l.call(ctx, round[int64]{
		need:    len(l.nodes), // ask every node; success below needs a majority
		timeout: timeout,
		waitAll: true,
		start:   l.observeNodes(OpForceRelease, name, l.sender(timeout, scriptCall{script: scripts.Force, keys: keys, args: args}, decodeDone, nil)),
	})
	if err != nil {
		return err
	}
	if res.Yes >= l.need {
		return nil
	}
	return withContext(ctx, l.roundError("force-release", name, &res, compareOutcome, ErrNoQuorum))
}

// describeHold names the lock that key, a hold, belongs to, in the
// user's names: the lock key, a semaphore's permit, a reader of a
// read-write lock.
func describeHold(key string) string {
	switch wire.KindOf(key) {
	case wire.Permit:
		return "a permit of semaphore " + quoteKey(wire.Name(key))
	case wire.Lease:
		return "a reader's lease of read-write lock " + quoteKey(wire.Name(key))
	}
	return "the lock key " + quoteKey(key)
}
