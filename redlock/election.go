package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/scripts"

	"context"
	"errors"
	"slices"
	"time"

	"github.com/quorumlock/redlock/quorum"
)

// Leader election is a lock that its holder keeps (KeepAlive) for as long
// as it leads, with fencing on: the lock's fence is the leader's term. Its
// guarantees are the lock's (docs/safety.md#leader-election).

// ObservePoll is how often Observe asks the nodes when no notification
// comes.
const ObservePoll = time.Second

// observePoll is ObservePoll but in tests.
var observePoll = ObservePoll

// Leadership is a campaign that won: this caller leads the election until
// its Context ends. Its methods are safe for concurrent use.
type Leadership struct {
	name string
	lock *Lock
	// ctx is the leader's context (see Context); stop ends its
	// extension.
	ctx  context.Context
	stop context.CancelFunc
}

// Campaign blocks until this caller leads the election name, or ctx ends.
// It obtains a lock on name as Obtain does (the same options and rules for
// the name, with fencing on; WithToken fails with ErrInvalid), and keeps it
// extended as KeepAlive does until Resign or a loss. WithMetadata is what
// the leader publishes. ctx bounds the campaign only: the leadership
// outlives it. The TTL is the election's failover time; one too short for
// KeepAlive fails with ErrInvalid, asking no node.
//
// On failure it returns no leadership, leaves no key on the nodes, and
// Obtain's error: matching ErrNotObtained or ErrNoQuorum, and ctx.Err()
// when ctx ended.
func (l *Locker) Campaign(ctx context.Context, name string, opts ...Option) (*Leadership, error) {
	cfg, err := l.callConfig(name, opts)
	if err != nil {
		return nil, err
	}
	if cfg.tokenSet {
		return nil, invalid("WithToken is not for Campaign: a leadership is one campaign's, never a re-entry")
	}
	if err := cfg.checkKeepAlive(); err != nil {
		return nil, err
	}
	lock, err := l.Obtain(ctx, name, append(slices.Clone(opts), WithFencing(), confirmFence)...)
	if err != nil {
		return nil, err
	}
	held, stop := lock.KeepAlive(context.WithoutCancel(ctx))
	if cause := context.Cause(held); cause != nil {
		// KeepAlive refused the lock's TTL (checked above, so this does
		// not happen): give the lock back rather than lead unkept.
		stop()
		return nil, errors.Join(cause, lock.Release(context.WithoutCancel(ctx)))
	}
	l.announce(name)
	return &Leadership{name: name, lock: lock, ctx: held, stop: stop}, nil
}

// announce tells every node's subscribers of name's release channel that
// its holder changed, in the background (best effort: Observe polls too).
// Campaigners still waiting wake as well: each tries once, is refused with
// the new leader's TTL, and waits again; one round per change of leader.
func (l *Locker) announce(name string) {
	release, err := l.guard()
	if err != nil {
		return
	}
	defer release()
	keys, args := []string{name}, []any{releaseChannel(name)}
	timeout := l.cfg.nodeTimeout
	send := l.sender(timeout, scripts.Announce, keys, args, decodeAny, nil)
	for i := range l.nodes {
		l.bg.Add(1)
		send(context.Background(), i, func(int, quorum.Vote, int64, error) { l.bg.Done() })
	}
}

// Name returns the election's name.
func (ld *Leadership) Name() string { return ld.name }

// Context returns the leader's context. It ends with a cause matching
// ErrLockLost as soon as leadership is lost, at the latest the node timeout
// plus TTL/20 (at least 5 ms) before the validity ends; Resign ends it with
// context.Canceled, and Close with ErrLockLost and ErrClosed. Work done as
// the leader must stop when it ends.
func (ld *Leadership) Context() context.Context { return ld.ctx }

// Term returns the leadership's term, its lock's fence: greater than every
// earlier leader's term as long as the nodes keep their fencing counters.
// Resources the leader writes to should refuse lower terms.
func (ld *Leadership) Term() uint64 { return ld.lock.Fence() }

// Metadata returns what the leader published with WithMetadata.
func (ld *Leadership) Metadata() string { return ld.lock.Metadata() }

// Until returns the local deadline of the leadership's current validity; it
// moves with every extension.
func (ld *Leadership) Until() time.Time { return ld.lock.Until() }

// Resign ends the leadership: it cancels Context, waits for the extension
// to stop, and releases the keys, which wakes the waiting campaigners. It
// returns Release's error: nil when a majority released, ErrReleased on a
// second call, ErrLockNotHeld for a leadership that was lost.
func (ld *Leadership) Resign(ctx context.Context) error {
	ld.stop()
	return ld.lock.Release(ctx)
}

// LeaderInfo is what the nodes say of an election, from Leader and
// Observe; the fields after Leading are set only when it is true.
type LeaderInfo struct {
	Name     string        // the election's name
	Leading  bool          // a leader holds the election on a majority of nodes
	Metadata string        // what the leader published (WithMetadata)
	Term     uint64        // the leader's term; 0 while its Campaign has not written it back
	TTL      time.Duration // the leader's keys' time left on a majority (-1: no expiry)

	// token is the leader's: Observe tells leaders apart by it.
	token string
}

// Leader asks every node who leads the election name now, reading what
// Inspect reads; Leading is false when nobody does. A leader may show a
// round trip before its Campaign returns (with Term 0), and one that died
// until its keys expire. On failure it returns a zero LeaderInfo and an
// error matching ErrNoQuorum (fewer than a majority answered) or
// ErrInvalid (a bad name, two nodes that reach one server).
func (l *Locker) Leader(ctx context.Context, name string) (LeaderInfo, error) {
	st, err := l.Inspect(ctx, name)
	if err != nil {
		return LeaderInfo{}, err
	}
	info := LeaderInfo{Name: name}
	if st.Holder == "" {
		return info, nil
	}
	info.Leading, info.token = true, st.Holder
	var ttls []time.Duration
	for _, n := range st.Nodes {
		if !n.Held || n.Token != st.Holder {
			continue
		}
		info.Metadata = n.Metadata
		// The term is the fence that the leader's Campaign wrote back into
		// its own hold (confirmFence): only that hold's write-back writes
		// there, so any node that shows one shows the leader's term. The
		// nodes' counters are no such thing: a node may hold a count that
		// the leader never took (one of its grants came after the
		// decision), and before the write-back a majority may agree on a
		// count below the leader's.
		info.Term = max(info.Term, n.confirmed)
		ttl := n.TTL
		if ttl < 0 {
			ttl = time.Duration(1<<63 - 1)
		}
		ttls = append(ttls, ttl)
	}
	// The longest time a majority still holds the keys.
	slices.Sort(ttls)
	slices.Reverse(ttls)
	info.TTL = ttls[l.need-1]
	if info.TTL == time.Duration(1<<63-1) {
		info.TTL = -1
	}
	return info, nil
}

// Observe returns a channel that receives the election's state, as Leader
// reports it, at once and then at every change of leader; a leader only
// with its term. Releases and won campaigns wake it (unless WithPollingOnly),
// and it asks the nodes every ObservePoll and when the leader's keys are due
// to expire. While no majority answers it reports nothing. The channel keeps
// only the latest state, and is closed when ctx ends or at the next check
// after Close. A bad name fails with ErrInvalid; after Close, ErrClosed.
func (l *Locker) Observe(ctx context.Context, name string) (<-chan LeaderInfo, error) {
	if err := checkKey(name); err != nil {
		return nil, err
	}
	if err := l.closedErr(); err != nil {
		return nil, err
	}
	// Listen before the first look, so that no change falls in between.
	var (
		wake  <-chan struct{}
		leave = func() {}
	)
	if !l.cfg.pollingOnly {
		wake, leave = l.notify.wait(ctx, name, l.cfg.nodeTimeout)
	}
	out := make(chan LeaderInfo, 1)
	go func() {
		defer close(out)
		defer leave()
		l.observe(ctx, name, wake, out)
	}()
	return out, nil
}

func (l *Locker) observe(ctx context.Context, name string, wake <-chan struct{}, out chan LeaderInfo) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	var last *LeaderInfo
	for {
		// A wake-up from before this look is stale.
		select {
		case <-wake:
		default:
		}
		info, err := l.Leader(ctx, name)
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return
		}
		wait := observePoll
		if err == nil && info.Leading && info.Term == 0 {
			// A leader whose Campaign is still writing its term back: look
			// again shortly rather than report a leader without its term.
			wait = l.cfg.nodeTimeout
		} else if err == nil {
			if last == nil || changed(last, &info) {
				// Latest wins: a state the reader has not taken yet is
				// replaced.
				select {
				case <-out:
				default:
				}
				out <- info
				last = &info
			}
			if info.Leading && info.TTL >= 0 {
				wait = min(wait, info.TTL+time.Millisecond)
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		}
	}
}

// changed reports whether b is another leader (or none) than a.
func changed(a, b *LeaderInfo) bool {
	return a.Leading != b.Leading || a.token != b.token
}
