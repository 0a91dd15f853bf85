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
// as it leads, with fencing on: the lock's fence is the leader's term. It
// adds nothing to the algorithm, so it has the lock's guarantees: one leader
// at a time while the leader stops at its context's end, and terms that
// grow from one leader to the next while the nodes keep their counters.

// ObservePoll is how often Observe asks the nodes when no notification
// comes: a release notification that a node could not deliver, or a leader
// that took over without announcing it (a plain Obtain of the name), is seen
// at the latest this long after it happened. Observe also asks when the
// current leader's keys are due to expire.
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
// An election is a lock on name (the same keys, so the same rules for the
// name as for a lock key): Campaign obtains it as Obtain does, with fencing
// on, waking as soon as the previous leader resigns (or when its keys
// expire, if it died), and then keeps it extended as KeepAlive does until
// Resign, or until leadership is lost. The options are those of Obtain;
// WithMetadata is what the leader publishes (Leader, Observe), and
// WithRetry may bound the wait. WithToken is refused: a leader is one
// campaign, not a re-entry.
//
// ctx bounds the campaign only: the leadership outlives it (its Context
// carries ctx's values but not its cancellation). A won campaign is
// announced on the name's release channel, so that Observe learns of the new
// leader at once.
//
// The TTL is how long the election stays without a leader after a leader
// died without resigning; it must leave room for an extension before the
// leader is warned, as KeepAlive requires (more than twice the node timeout
// plus a twentieth of the TTL and the drift), or Campaign fails at once with
// an error matching ErrInvalid, asking no node.
//
// On failure it returns no leadership, leaves no key on the nodes, and
// Obtain's error: matching ErrNotObtained or ErrNoQuorum, and ctx.Err() when
// ctx ended.
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

// Context returns the leader's context: it is cancelled, with a cause
// matching ErrLockLost (context.Cause), as soon as leadership is lost (an
// extension found another holder, or none reached a majority in time), at
// the latest the node timeout plus a margin (a twentieth of the TTL, at least
// 5 ms) before the leadership's validity ends, so that the leader can stop
// while no other can lead yet. Resign cancels it with context.Canceled
// before letting go; the Locker's Close ends it at once, with a cause
// matching ErrLockLost and ErrClosed. Work done as the leader must stop when it ends.
func (ld *Leadership) Context() context.Context { return ld.ctx }

// Term returns the leadership's term: a number strictly greater than every
// earlier leader's term of this election, as long as the nodes keep their
// fencing counters (see WithFencing; WithRestartGuard keeps it true across
// nodes that lose their memory). It is the lock's fence: hand it to the
// resources the leader writes to, so that they refuse an older leader's
// writes.
func (ld *Leadership) Term() uint64 { return ld.lock.Fence() }

// Metadata returns what the leader published with WithMetadata.
func (ld *Leadership) Metadata() string { return ld.lock.Metadata() }

// Until returns the local deadline of the leadership's current validity; it
// moves with every extension.
func (ld *Leadership) Until() time.Time { return ld.lock.Until() }

// Resign ends the leadership at once: it cancels Context, waits for the
// extension to stop, and releases the election's keys, which wakes the
// campaigners waiting for it (on every node, at once), so the next leader
// takes over within a round trip or two. It returns Release's error: nil
// when a majority released. A leadership resigns once; later calls return
// an error matching ErrReleased. Resigning a lost leadership releases what
// is left of it and returns an error matching ErrLockNotHeld.
func (ld *Leadership) Resign(ctx context.Context) error {
	ld.stop()
	return ld.lock.Release(ctx)
}

// LeaderInfo is what the nodes say of an election, from Leader and
// Observe.
type LeaderInfo struct {
	// Name is the election's name.
	Name string
	// Leading is true when a leader holds the election on a majority of
	// nodes; the other fields are set only then.
	Leading bool
	// Metadata is what the leader published (WithMetadata).
	Metadata string
	// Term is the leader's term (Leadership.Term), or 0 while the
	// leader's Campaign has not yet written it back to the nodes (it is
	// still returning): Leader never reports a term the leader does not
	// hold, and Observe reports a leader only with its term.
	Term uint64
	// TTL is the time the leader's keys have left on a majority of nodes
	// (-1 without expiry), by the servers' clocks: a leader that stopped
	// extending them is replaced about this long from now at the latest.
	TTL time.Duration
	// token is the leader's: Observe tells leaders apart by it.
	token string
}

// Leader asks every node who leads the election name now: the leader's
// metadata, term and remaining TTL, or, with Leading false, that nobody
// does. It reads what Inspect reads. A leader whose Campaign is still
// returning may show up a round trip early, with Term 0 until its term is
// written back; one that died shows until its keys expire. On failure (fewer than a majority of nodes answered, two
// nodes reach one server, a bad name) it returns an error matching
// ErrNoQuorum or ErrInvalid and a zero LeaderInfo.
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

// Observe returns a channel that receives the election's state (as Leader
// reports it) at once and then at every change of leader: a new leader,
// or none. It is woken by release notifications (a leader that resigns)
// and by the announcement of every won Campaign, and asks the nodes at
// least every ObservePoll and when the current leader's keys are due to
// expire, so that a lost notification or a leader that died is seen too.
// A Locker made WithPollingOnly observes by polling alone.
// While a majority of nodes cannot be reached it reports nothing.
//
// The channel keeps the latest state only: a reader that falls behind
// finds the newest one, and misses the states in between. It is closed when
// ctx ends, or at the next check after the Locker is closed. A bad name
// fails at once with an error matching ErrInvalid; after Close, Observe
// fails with ErrClosed.
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
