package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/scripts"

	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
)

// Status is what the nodes know of a lock, from Inspect.
type Status struct {
	// Key is the lock key.
	Key string
	// Holder is the token that holds the key on a majority of nodes, or ""
	// when no token does.
	Holder string
	// Nodes holds one entry per node, in the order the clients were given.
	Nodes []NodeStatus
}

// NodeStatus is one node's view of a lock.
type NodeStatus struct {
	// Addr is the node's address, with any credentials removed.
	Addr string
	// Held is true when the key exists on the node.
	Held bool
	// Token, Metadata and Holds describe the holder when Held is true.
	// Holds counts the Locks that hold the key with the token: 1, more
	// after re-entries, 0 while a cooldown (ReleaseAfter) keeps the key.
	Token    string
	Metadata string
	Holds    int
	// TTL is the key's remaining time (-1 without expiry) when Held.
	TTL time.Duration
	// Fence is the node's fencing counter for the key (0 unless fencing was
	// used on it): the fence of the latest holder this node granted or saw.
	Fence uint64
	// Err is the node's error, if it could not be asked.
	Err error
	// confirmed is the fence that the one hold on the key wrote back here
	// (see fence.lua), 0 when none did: a leader's term, once confirmed.
	confirmed uint64
}

// Inspect asks every node what it holds for key: the holder's token,
// metadata, number of holds and remaining TTL, or the node's error. It
// returns the status even when some nodes fail; the error matches
// ErrNoQuorum when fewer than a majority answered, or ErrInvalid when two
// nodes reach the same server. A key that Obtain would reject (empty, too
// long, or starting with ReservedPrefix) fails with an error matching
// ErrInvalid, and no status, before any node is asked.
func (l *Locker) Inspect(ctx context.Context, key string) (*Status, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	release, err := l.guard()
	if err != nil {
		return nil, err
	}
	defer release()
	st := &Status{Key: key, Nodes: make([]NodeStatus, len(l.nodes))}
	keys := []string{key, fenceKey(key)}
	var (
		mu    sync.Mutex
		final bool // set once the round is decided: a straggler's answer is dropped
	)
	timeout := l.cfg.nodeTimeout
	// One answer per server (callNonce): a server reached through two node
	// addresses must not show a holder twice.
	nonce, keep := callNonce(timeout)
	args := []any{nonce, keep}
	cmd := evalSha(scripts.Inspect, keys, args)
	runRound(ctx, l, round[int64]{
		need:    len(l.nodes),
		timeout: timeout,
		waitAll: true,
		start: func(_ context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
			l.nodes[i].pipe.startRaw(timeout, scripts.Inspect, keys, args, cmd, func(got *redis.Cmd) {
				ns := inspectReply(l.nodes[i].addr, got)
				mu.Lock()
				if !final {
					st.Nodes[i] = ns
				}
				mu.Unlock()
				reply(i, quorum.Yes, 0, nil)
			})
		},
	})
	mu.Lock()
	final = true
	mu.Unlock()
	answered, votes, refused := 0, map[string]int{}, false
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if n.Addr == "" { // still running at the timeout
			n.Addr, n.Err = l.nodes[i].addr, withCause(quorum.ErrTimeout, &l.nodes[i].pipe.cause)
		}
		if n.Err == nil {
			answered++
		}
		// A node that reaches another node's server: the cluster is
		// miscounted, which the caller must hear of.
		refused = refused || errors.Is(n.Err, ErrInvalid)
		if n.Held {
			votes[n.Token]++
		}
	}
	for tok, c := range votes {
		if c >= l.need {
			st.Holder = tok
		}
	}
	if answered < l.need || refused {
		nodes := make([]NodeResult, 0, len(st.Nodes))
		for _, n := range st.Nodes {
			o := OutcomeOK
			if n.Err != nil {
				o = OutcomeError
			}
			nodes = append(nodes, NodeResult{Addr: n.Addr, Outcome: o, Err: n.Err})
		}
		return st, withContext(ctx, newQuorumError("inspect", key, l.need, nodes, ErrNoQuorum))
	}
	return st, nil
}

// ForceRelease deletes the lock on key on every node, whoever holds it, and
// wakes its waiters: the way out of a stuck lock whose owner is gone. The
// owner, if alive, is not told and will find its lock lost at its next
// extension. It fails with an error matching ErrNoQuorum when fewer than a
// majority of nodes could be reached. A key that Obtain would reject (empty,
// too long, or starting with ReservedPrefix) fails with an error matching
// ErrInvalid and touches no node: the library's own keys cannot be removed
// through it.
func (l *Locker) ForceRelease(ctx context.Context, key string) (err error) {
	ctx, tr := l.cfg.obs.begin(ctx, OpForceRelease, key)
	defer func() { tr.done(ctx, err) }()
	if err := checkKey(key); err != nil {
		return err
	}
	// Logged before any node deletes: a Lock of this Locker that then
	// finds its key gone is told it was released, not that it expired.
	l.forced.note(key)
	timeout := l.cfg.nodeTimeout
	res, err := l.call(ctx, round[int64]{
		need:    len(l.nodes), // ask every node; success below needs a majority
		timeout: timeout,
		waitAll: true,
		start:   l.observeNodes(OpForceRelease, key, l.sender(timeout, scripts.Force, []string{key}, []any{releaseChannel(key)}, decodeDone, nil)),
	})
	if err != nil {
		return err
	}
	if res.Yes >= l.need {
		return nil
	}
	return withContext(ctx, l.roundError("force-release", key, &res, compareOutcome, ErrNoQuorum))
}

// Bootstrap seeds the restart guard's memory marker on every node, so that a
// fresh cluster votes at once instead of abstaining for the guard's maximum
// TTL. The marker is stamped with the server's run_id and evicted-keys count,
// as the acquire script stamps it. Run it once, when the cluster is first set
// up, never on a cluster whose nodes may have lost locks that are still held
// and with them their markers (a restart without persistence, a flush): that
// would let a forgetful node vote again at once, which is what the guard
// prevents. A node that already has its marker with the current stamp is
// left as it is, and so is a node that already noticed a loss and abstains
// (its quarantine protects the locks it forgot).
//
// A marker with another stamp is a loss, never a fresh node: the server
// restarted (reloading the marker from a snapshot or AOF), is a promoted
// replica, or evicted keys, since it was stamped. Bootstrap does not clear
// it: when the Locker has WithRestartGuard it starts the node's quarantine
// now; without it, it leaves the marker for the first guarded acquisition to
// notice. Either way the node is reported as abstaining. A node whose
// maxmemory-policy may evict keys is reported too.
//
// It fails with an error matching ErrNoQuorum, naming the nodes, unless every
// node was reached and none abstains.
//
// With ClearQuarantine, it also ends the quarantine of abstaining nodes and
// stamps them anew, so that they vote at once: the way out of a guarded
// acquisition made before Bootstrap on a fresh cluster, which quarantines
// every node for the guard's maximum TTL. See ClearQuarantine for what it
// checks first.
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
		start:   l.sender(timeout, scripts.Bootstrap, keys, args, decodeBootstrap, nil),
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

// ClearQuarantine states that no lock of the library is held on the
// cluster, so that Bootstrap also ends the restart guard's quarantine of the
// nodes that abstain and stamps them anew (see Bootstrap). Before it
// changes anything, Bootstrap looks (SCAN) on every node for a key that
// holds a lock (a value the library wrote: token, holds and metadata); it
// fails with an error matching ErrInvalid, naming the node and the key, if
// one does, and with one matching ErrNoQuorum (ErrMisconfigured if it
// refused the search for good) if a node cannot be searched.
// Then no held lock has its keys only on a node that forgot them (a lock's
// keys live on a majority, and every node was searched), which is what the
// quarantine protects; a lock granted after the search is remembered by
// every node that granted it.
//
// What the quarantine also gives, and clearing takes away, is time: a
// cleared node that had lost its memory restarts its fencing counters from
// its clock at once, so fences stay increasing only as long as that clock
// is not behind the fences it handed out before.
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
		addr := singleLine(l.nodes[i].addr)
		switch {
		case err != nil:
			reason := ErrNoQuorum
			if permanent(err) {
				reason = ErrMisconfigured
			}
			return withContext(ctx, fmt.Errorf("%w: bootstrap: cannot search %s for lock keys: %s", reason, addr, nodeErrText(err)))
		case key != "":
			return invalid("bootstrap: %s holds the lock key %s: a lock may be held, so no quarantine is cleared", addr, quoteKey(key))
		}
	}
	return nil
}

// lockKeyOn returns a key of node i that holds a lock, "" when none does.
func (l *Locker) lockKeyOn(ctx context.Context, i int) (string, error) {
	c := l.nodes[i].pipe.own
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
	keys = slices.DeleteFunc(keys, func(k string) bool { return strings.HasPrefix(k, ReservedPrefix) })
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
		if v, err := g.Result(); err == nil && isLockValue(v) {
			return keys[j], 0, nil
		}
	}
	return "", next, nil
}

// isLockValue reports whether v is a value the scripts write: token, NUL,
// the holds (hold ids of [0-9a-z], each maybe with ":" and its fence,
// separated by spaces; none while a cooldown keeps the key), NUL,
// metadata.
func isLockValue(v string) bool {
	parts := strings.SplitN(v, "\x00", 3)
	if len(parts) != 3 || parts[0] == "" {
		return false
	}
	for _, r := range parts[1] {
		if (r < '0' || r > '9') && (r < 'a' || r > 'z') && r != ':' && r != ' ' {
			return false
		}
	}
	return true
}
