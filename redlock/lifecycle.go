package redlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/quorum"
)

// lostError is the cause of a KeepAlive context when the lock is lost: it
// matches ErrLockLost, and also the reason the servers gave.
type lostError struct{ reason error }

func (e *lostError) Error() string {
	switch {
	case e.reason == nil:
		return "redlock: lock lost"
	case e.reason == ErrLockExpired:
		return "redlock: lock lost: no extension reached a majority in time (its validity ends within the node timeout and margin)"
	}
	return "redlock: lock lost: " + e.reason.Error()
}

func (e *lostError) Unwrap() []error {
	if e.reason == nil {
		return []error{ErrLockLost}
	}
	return []error{ErrLockLost, e.reason}
}

// minWarnMargin is the least margin of the warning lead (see warnLead).
const minWarnMargin = 5 * time.Millisecond

// warnLead is how long before Until KeepAlive gives up on extending and
// tells the work: the node timeout, because an extension still in flight then
// cannot be counted on to finish before Until, plus a margin of a twentieth
// of the TTL (at least minWarnMargin), so that the work hears of it, and can
// stop, while no one else can hold the lock yet, even with timers running
// late on a loaded machine.
func (c *config) warnLead() time.Duration {
	return c.nodeTimeout + max(c.ttl/20, minWarnMargin)
}

// checkKeepAlive rejects a TTL too short for one extension (which may take
// the node timeout) to finish before the warning, even after an instant
// acquisition: such a lock would be kept by luck only, and lost at the first
// slow round.
func (c *config) checkKeepAlive() error {
	drift := clock.Drift(c.ttl, c.driftFactor)
	if room := c.ttl - drift - c.warnLead() - c.nodeTimeout; room <= 0 {
		return invalid("TTL %v leaves no time to extend the lock before its holder must be warned: it must exceed twice the node timeout %v plus the margin %v and the drift %v",
			c.ttl, c.nodeTimeout, c.warnLead()-c.nodeTimeout, drift)
	}
	return nil
}

// KeepAlive extends the lock in the background until stop is called or ctx
// ends, and returns a context derived from ctx that is cancelled, with a
// cause matching ErrLockLost (context.Cause), as soon as the lock is lost:
// an extension found it not ours, or no extension reached a majority in
// time.
//
// The work is told at the latest the node timeout plus a margin (a
// twentieth of the TTL, at least 5 ms) before Until, whatever an
// extension in flight is doing: the deadline is watched beside the
// extension, not after it, and moves with Until on every successful
// extension. Loss is final: the lock is then no longer Valid, even if an
// extension still in flight succeeds afterwards.
//
// It extends when about a third of the TTL has passed since the last
// extension (or the acquisition), and after a failed one (an outage) it
// tries again every twenty-fourth of the TTL, the last attempt no later than
// one node timeout before the warning, so that retries fit within the
// validity.
//
// When the lock's TTL leaves no room for one extension before that warning
// (it must exceed twice the node timeout, the margin and the drift), the
// returned context is already cancelled with a cause matching ErrInvalid,
// not ErrLockLost, and nothing runs in the background; the lock is left as
// it was.
//
// stop ends the background goroutine and waits for it (for at most about a
// node timeout, while an extension in flight ends); it does not release the
// lock. It is safe to call more than once.
func (k *Lock) KeepAlive(ctx context.Context) (held context.Context, stop context.CancelFunc) {
	held, cancel := context.WithCancelCause(ctx)
	if err := k.cfg.checkKeepAlive(); err != nil {
		cancel(err)
		return held, func() { cancel(err) }
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.keepAlive(held, quit, cancel)
	}()
	var once sync.Once
	return held, func() {
		once.Do(func() {
			close(quit)
			<-done
			cancel(context.Canceled)
		})
	}
}

func (k *Lock) keepAlive(ctx context.Context, quit <-chan struct{}, lose context.CancelCauseFunc) {
	ttl, timeout, lead := k.cfg.ttl, k.cfg.nodeTimeout, k.cfg.warnLead()
	// After a failed extension (an outage), try again soon, so that
	// several attempts fit before the warning.
	retry := ttl / 24
	now := k.cfg.clock.Now
	// plan returns how long to wait before the next extension: after
	// (when two thirds of the TTL are left before Until, about a third of
	// the TTL after the last extension began; or retry after a failure),
	// but no later than one node timeout before the warning, the last
	// moment from which even a slow round finishes in time.
	plan := func(after time.Duration) time.Duration {
		latest := k.Until().Add(-lead - timeout).Sub(now())
		return max(min(after, latest), 0)
	}
	next := time.NewTimer(plan(k.Until().Add(-2 * ttl / 3).Sub(now())))
	defer next.Stop()
	warnIn := func() time.Duration { return k.Until().Add(-lead).Sub(now()) }
	warn := time.NewTimer(warnIn())
	defer warn.Stop()

	// One extension at a time runs in its own goroutine, so that the warning
	// is never held up by a round waiting on slow nodes. On the way out it
	// is cancelled and waited for.
	extCtx, cancelExt := context.WithCancel(ctx)
	results := make(chan error, 1)
	inFlight := false
	defer func() {
		cancelExt()
		if inFlight {
			<-results
		}
	}()
	for {
		select {
		case <-quit:
			return
		case <-ctx.Done():
			return
		case <-warn.C:
			if k.released() {
				return // the owner let go; nothing is lost
			}
			if d := warnIn(); d > 0 {
				warn.Reset(d) // Until moved (an Extend of the owner's own)
				continue
			}
			// No extension reached a majority in time. Tell the work now;
			// an extension in flight cannot undo it.
			err := &lostError{reason: ErrLockExpired}
			k.markLost(err)
			k.cfg.obs.lost(ctx, k, err)
			lose(err)
			return
		case <-next.C:
			if k.released() {
				return
			}
			inFlight = true
			go func() { results <- k.Extend(extCtx, ttl) }()
		case err := <-results:
			inFlight = false
			switch {
			case err == nil:
				warn.Reset(warnIn())
				next.Reset(plan(k.Until().Add(-2 * ttl / 3).Sub(now())))
			case errors.Is(err, ErrLockNotHeld):
				if !k.released() {
					k.cfg.obs.lost(ctx, k, &lostError{reason: err})
					lose(&lostError{reason: err})
				}
				return
			case ctx.Err() != nil:
				return
			default:
				next.Reset(plan(retry))
			}
		}
	}
}

// Do obtains the lock on key (waiting as Obtain does), runs fn, keeps the
// lock extended while fn runs (see KeepAlive), and releases it when fn
// returns.
//
// If the lock is lost while fn runs, fn's context is cancelled with a cause
// matching ErrLockLost (context.Cause), at the latest the node timeout plus
// a margin (a twentieth of the TTL, at least 5 ms) before Until, whatever an
// extension in flight is doing; Do then returns an error matching
// ErrLockLost (joined with fn's own error, if any). Otherwise Do returns
// fn's error joined with any error from Release. When the lock cannot be
// obtained, fn does not run and Do returns Obtain's error. When the TTL
// leaves no room to extend the lock before that warning (it must exceed
// twice the node timeout, the margin and the drift), fn does not run and
// Do returns an error matching ErrInvalid without asking any node.
//
// If fn panics, Do stops the extension and releases the lock, then lets the
// panic go on with its own value. The background extension always ends
// before Do returns.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...Option) (err error) {
	if fn == nil {
		return invalid("nil fn")
	}
	cfg, err := l.callConfig(key, opts)
	if err != nil {
		return err
	}
	if err := cfg.checkKeepAlive(); err != nil {
		return err
	}
	lock, err := l.Obtain(ctx, key, opts...)
	if err != nil {
		return err
	}
	held, stop := lock.KeepAlive(ctx)
	// Deferred, so that it runs when fn panics (or calls runtime.Goexit)
	// as well: the extension stops and the lock is released, and the
	// panic then goes on unchanged.
	defer func() {
		stop()
		// Read after stop: a loss signalled until then counts.
		lost := context.Cause(held)
		rerr := lock.Release(context.WithoutCancel(ctx))
		if errors.Is(lost, ErrLockLost) {
			err = errors.Join(err, lost)
			return
		}
		err = errors.Join(err, rerr)
	}()
	return fn(held)
}

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
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.mu.RUnlock()
	st := &Status{Key: key, Nodes: make([]NodeStatus, len(l.nodes))}
	keys := []string{key, fenceKey(key)}
	var (
		mu    sync.Mutex
		final bool // set once the round is decided: a straggler's answer is dropped
	)
	timeout := l.cfg.nodeTimeout
	cmd := evalSha(inspectScript, keys, nil)
	quorum.Run(ctx, &quorum.Round[int64]{
		Nodes:   len(l.nodes),
		Need:    len(l.nodes),
		Timeout: timeout,
		WaitAll: true,
		Start: func(_ context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
			l.nodes[i].pipe.startRaw(timeout, inspectScript, keys, nil, cmd, func(got *redis.Cmd) {
				ns := inspectReply(l.nodes[i].addr, got)
				mu.Lock()
				if !final {
					st.Nodes[i] = ns
				}
				mu.Unlock()
				reply(i, quorum.Yes, 0, nil)
			})
		},
		Background: &l.bg,
	})
	mu.Lock()
	final = true
	mu.Unlock()
	answered, votes, refused := 0, map[string]int{}, false
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if n.Addr == "" { // still running at the timeout
			n.Addr, n.Err = l.nodes[i].addr, quorum.ErrTimeout
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
		res := &QuorumError{Op: "inspect", Key: key, Need: l.need, reason: ErrNoQuorum}
		for _, n := range st.Nodes {
			o := OutcomeOK
			if n.Err != nil {
				o = OutcomeError
			}
			res.Nodes = append(res.Nodes, NodeResult{Addr: n.Addr, Outcome: o, Err: n.Err})
		}
		return st, withContext(ctx, res)
	}
	return st, nil
}

func inspectReply(addr string, cmd *redis.Cmd) NodeStatus {
	ns := NodeStatus{Addr: addr}
	vals, err := cmd.Slice()
	if err != nil {
		ns.Err = err
		return ns
	}
	if len(vals) != 3 {
		ns.Err = errors.New("redlock: unexpected inspect reply")
		return ns
	}
	if f, ok := vals[2].(int64); ok && f > 0 {
		ns.Fence = uint64(f)
	}
	v, ok := vals[0].(string)
	if !ok {
		return ns // no key
	}
	pttl, _ := vals[1].(int64)
	ns.Held, ns.TTL = true, time.Duration(pttl)*time.Millisecond
	if pttl < 0 {
		ns.TTL = -1
	}
	// The value is token \0 holds \0 metadata; anything else was not written
	// by this library and is shown whole as the token.
	parts := strings.SplitN(v, "\x00", 3)
	ns.Token = parts[0]
	if len(parts) == 3 {
		ns.Holds, _ = strconv.Atoi(parts[1])
		ns.Metadata = parts[2]
	}
	return ns
}

// ForceRelease deletes the lock on key on every node, whoever holds it, and
// wakes its waiters: the way out of a stuck lock whose owner is gone. The
// owner, if alive, is not told and will find its lock lost at its next
// extension. It fails with an error matching ErrNoQuorum when fewer than a
// majority of nodes could be reached. A key that Obtain would reject (empty,
// too long, or starting with ReservedPrefix) fails with an error matching
// ErrInvalid and touches no node: the library's own keys cannot be removed
// through it.
func (l *Locker) ForceRelease(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := l.enter(); err != nil {
		return err
	}
	defer l.mu.RUnlock()
	keys, channel := []string{key}, releaseChannel(key)
	timeout := l.cfg.nodeTimeout
	res := quorum.Run(ctx, &quorum.Round[int64]{
		Nodes:      len(l.nodes),
		Need:       len(l.nodes), // ask every node; success below needs a majority
		Timeout:    timeout,
		WaitAll:    true,
		Start:      l.sender(timeout, forceScript, keys, []any{channel}, decodeDone, nil),
		Background: &l.bg,
	})
	if res.Yes >= l.need {
		return nil
	}
	qe := l.quorumError("force-release", key, &res, compareOutcome)
	qe.reason = ErrNoQuorum
	return withContext(ctx, qe)
}
