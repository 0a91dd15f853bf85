package redlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

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
		return "redlock: lock lost: its validity ran out before an extension reached a majority"
	}
	return "redlock: lock lost: " + e.reason.Error()
}

func (e *lostError) Unwrap() []error {
	if e.reason == nil {
		return []error{ErrLockLost}
	}
	return []error{ErrLockLost, e.reason}
}

// KeepAlive extends the lock in the background, about every third of its
// TTL, until stop is called or ctx ends. It returns a context derived from
// ctx that is cancelled, with a cause matching ErrLockLost
// (context.Cause), as soon as the lock is lost: an extension found it not
// ours, or its validity ran out before an extension could reach a majority.
// Loss is final; the lock is then no longer Valid.
//
// stop ends the background goroutine and waits for it; it does not release
// the lock. It is safe to call more than once.
func (k *Lock) KeepAlive(ctx context.Context) (held context.Context, stop context.CancelFunc) {
	held, cancel := context.WithCancelCause(ctx)
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
	ttl := k.cfg.ttl
	every := ttl / 3
	// After a failed extension (an outage), try again sooner, as long as
	// the lock is still valid.
	retry := max(every/8, k.cfg.nodeTimeout)
	next := time.NewTimer(every)
	defer next.Stop()
	left := func() time.Duration { return k.Until().Sub(k.cfg.clock.Now()) }
	deadline := time.NewTimer(left())
	defer deadline.Stop()
	for {
		select {
		case <-quit:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			// Validity ran out before any extension succeeded.
			err := &lostError{reason: ErrLockExpired}
			k.markLost(err)
			lose(err)
			return
		case <-next.C:
		}
		if k.released() {
			return // the owner let go; nothing is lost
		}
		err := k.Extend(ctx, ttl)
		switch {
		case err == nil:
			deadline.Reset(left())
			next.Reset(every)
		case errors.Is(err, ErrLockNotHeld):
			if !k.released() {
				lose(&lostError{reason: err})
			}
			return
		case ctx.Err() != nil:
			return
		default:
			next.Reset(retry)
		}
	}
}

// Do obtains the lock on key (waiting as Obtain does), runs fn, keeps the
// lock extended while fn runs, and releases it when fn returns.
//
// If the lock is lost while fn runs, fn's context is cancelled at once with a
// cause matching ErrLockLost (context.Cause), and Do returns an error
// matching ErrLockLost (joined with fn's own error, if any). Otherwise Do
// returns fn's error joined with any error from Release. When the lock cannot
// be obtained, fn does not run and Do returns Obtain's error. The background
// extension always ends before Do returns.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...Option) error {
	lock, err := l.Obtain(ctx, key, opts...)
	if err != nil {
		return err
	}
	held, stop := lock.KeepAlive(ctx)
	ferr := fn(held)
	lost := context.Cause(held)
	stop()
	rerr := lock.Release(context.WithoutCancel(ctx))
	if errors.Is(lost, ErrLockLost) {
		return errors.Join(ferr, lost)
	}
	return errors.Join(ferr, rerr)
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
// nodes reach the same server.
func (l *Locker) Inspect(ctx context.Context, key string) (*Status, error) {
	if key == "" {
		return nil, invalid("empty key")
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
// majority of nodes could be reached.
func (l *Locker) ForceRelease(ctx context.Context, key string) error {
	if key == "" {
		return invalid("empty key")
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
