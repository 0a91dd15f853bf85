package redlock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
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
// its fencing counter (counterOf). With an index of leases, it also
// returns the leases any node lists in it.
func (l *Locker) inspect(ctx context.Context, key, index string) (*Status, []string, error) {
	release, err := l.guard()
	if err != nil {
		return nil, nil, err
	}
	defer release()
	st := &Status{Key: key, Nodes: make([]NodeStatus, len(l.nodes))}
	keys := []string{key, counterOf(key)}
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
	nonce, keep := callNonce(timeout)
	args := []any{nonce, keep}
	cmd := conn.EvalSha(scripts.Inspect, keys, args)
	runRound(ctx, l, round[int64]{
		need:    len(l.nodes),
		timeout: timeout,
		waitAll: true,
		start: func(_ context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
			l.nodes[i].sendRaw(timeout, scripts.Inspect, keys, cmd, func(got *redis.Cmd) {
				ns, listed := inspectReply(l.nodes[i].addr, got)
				mu.Lock()
				if !final {
					st.Nodes[i] = ns
					for _, k := range listed {
						leases[k] = true
					}
				}
				mu.Unlock()
				reply(i, quorum.Yes, 0, nil)
			})
		},
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
	return s.l.forceRelease(ctx, wire.Sem(s.name), append([]string{wire.SemSize(s.name)}, s.slots()...), 0)
}

// ForceRelease deletes the read-write lock's writer key and every
// reader's lease on every node, whoever holds them, with the lock's index
// of leases and a waiting writer's mark, and wakes its waiters; as
// Locker.ForceRelease otherwise.
func (m *RWMutex) ForceRelease(ctx context.Context) error {
	if err := checkKey(m.name); err != nil {
		return m.l.forceFailed(ctx, m.name, err)
	}
	return m.l.forceRelease(ctx, m.name, []string{m.name, wire.RWMark(m.name), wire.RWIndex(m.name)}, 3)
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
	args := []any{releaseChannel(name), wire.ForcedPrefix, forcedGrace.Milliseconds()}
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

// Bootstrap seeds the restart guard's marker on every node so that a fresh
// cluster votes at once; run it once, at set-up (docs/safety.md#bootstrap).
// It seeds no node that abstains, and fails with ErrNoQuorum, naming the
// nodes, unless every node was reached and none abstains.
func (l *Locker) Bootstrap(ctx context.Context, opts ...BootstrapOption) error {
	var bc bootstrapConfig
	for _, o := range opts {
		if o == nil {
			return invalid("nil BootstrapOption")
		}
		o(&bc)
	}
	keys := []string{guardMarker, guardQuarantine}
	args := []any{max(l.cfg.guard, 0).Milliseconds()}
	if bc.clear {
		if err := l.noLockKeys(ctx); err != nil {
			return err
		}
		args = append(args, "1")
	}
	timeout := l.cfg.nodeTimeout
	res, err := l.call(ctx, round[int64]{
		need:    len(l.nodes),
		timeout: timeout,
		waitAll: true,
		start:   l.sender(timeout, scriptCall{script: scripts.Bootstrap, keys: keys, args: args}, decodeBootstrap, nil),
	})
	if err != nil {
		return err
	}
	if res.OK {
		return nil
	}
	qe := l.roundError("bootstrap", "", &res, compareOutcome, ErrNoQuorum)
	qe.Need = len(l.nodes) // every node, not a majority
	return withContext(ctx, qe)
}

// BootstrapOption changes what Bootstrap does.
type BootstrapOption func(*bootstrapConfig)

type bootstrapConfig struct{ clear bool }

// ClearQuarantine states that no lock is held: Bootstrap then also ends the
// quarantines and stamps the nodes anew, after searching every node for a
// lock's key. It fails with ErrInvalid (naming the node and key) if it
// finds one, with ErrNoQuorum (ErrMisconfigured if refused for good) if a
// node cannot be searched (docs/safety.md#bootstrap).
func ClearQuarantine() BootstrapOption { return func(c *bootstrapConfig) { c.clear = true } }

// noLockKeys searches every node for a key that holds a lock; see
// ClearQuarantine.
func (l *Locker) noLockKeys(ctx context.Context) error {
	release, err := l.guard()
	if err != nil {
		return err
	}
	defer release()
	for i := range l.nodes {
		key, err := l.lockKeyOn(ctx, i)
		addr := conn.SingleLine(l.nodes[i].addr)
		switch {
		case err != nil:
			reason := ErrNoQuorum
			if conn.Permanent(err) {
				reason = ErrMisconfigured
			}
			return withContext(ctx, fmt.Errorf("%w: bootstrap: cannot search %s for lock keys: %s", reason, addr, nodeErrText(err)))
		case key != "":
			return invalid("bootstrap: %s holds %s: a lock may be held, so no quarantine is cleared", addr, describeHold(key))
		}
	}
	return nil
}

// lockKeyOn returns a key of node i that holds a lock, "" when none does.
func (l *Locker) lockKeyOn(ctx context.Context, i int) (string, error) {
	c := l.nodes[i].pipe.Client()
	var cursor uint64
	for {
		found, next, err := l.scanLockKeys(ctx, c, cursor)
		if err != nil || found != "" {
			return found, err
		}
		if next == 0 {
			return "", nil
		}
		cursor = next
	}
}

// scanLockKeys runs one SCAN step from cursor and reads the string keys it
// returns, within one node timeout.
func (l *Locker) scanLockKeys(ctx context.Context, c *redis.Client, cursor uint64) (string, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.nodeTimeout)
	defer cancel()
	keys, next, err := c.ScanType(ctx, cursor, "", 1000, "string").Result()
	if err != nil {
		return "", 0, err
	}
	// Every kind of key that can be a hold (wire.Kind.Holds): a lock key,
	// a permit, a reader's lease.
	keys = slices.DeleteFunc(keys, func(k string) bool { return !wire.KindOf(k).Holds() })
	gets := make([]*redis.StringCmd, len(keys))
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, k := range keys {
			gets[j] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		// A key gone since the SCAN is no error.
		return "", 0, err
	}
	for j, g := range gets {
		if v, err := g.Result(); err == nil && wire.IsLockValue(v) {
			return keys[j], 0, nil
		}
	}
	return "", next, nil
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
