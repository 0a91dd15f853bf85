package redlock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// Leader election is a lock that its holder keeps (KeepAlive) for as long
// as it leads, with fencing on: the lock's fence is the leader's term. Its
// guarantees are the lock's (docs/safety.md#leader-election).

// ObservePoll is how often Observe asks the nodes unless notified.
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

// Campaign blocks until this caller leads the election name, or ctx ends:
// it obtains the lock name with fencing, as Obtain does, and keeps it as
// KeepAlive does until Resign or a loss; the leadership outlives ctx. It
// fails as Obtain does, and with ErrInvalid for WithToken or a TTL too short.
// As Obtain, it takes name without looking at a read-write lock's leases.
func (l *Locker) Campaign(ctx context.Context, name string, opts ...LockOption) (*Leadership, error) {
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
	send := l.sender(timeout, scriptCall{script: scripts.Announce, keys: keys, args: args}, decodeAny, nil)
	for i := range l.nodes {
		l.bg.Add(1)
		send(context.Background(), i, func(int, quorum.Vote, int64, error) { l.bg.Done() })
	}
}

// Name returns the election's name.
func (ld *Leadership) Name() string { return ld.name }

// Context returns the leader's context: it ends (ErrLockLost) once
// leadership is lost, before the validity ends, as KeepAlive's does; Resign
// ends it with context.Canceled, Close with ErrLockLost and ErrClosed.
func (ld *Leadership) Context() context.Context { return ld.ctx }

// Term returns the leadership's term, its lock's fence: above every earlier
// leader's while the nodes keep their counters; refuse lower terms.
func (ld *Leadership) Term() uint64 { return ld.lock.Fence() }

// Metadata returns what the leader published with WithMetadata.
func (ld *Leadership) Metadata() string { return ld.lock.Metadata() }

// Until returns the leadership's local validity deadline; extensions move it.
func (ld *Leadership) Until() time.Time { return ld.lock.Until() }

// Resign cancels Context, stops the extension and releases the keys; it
// returns Release's error (ErrReleased when called again).
func (ld *Leadership) Resign(ctx context.Context) error {
	ld.stop()
	return ld.lock.Release(ctx)
}

// LeaderInfo is an election's state, from Leader and Observe.
type LeaderInfo struct {
	Name     string        // the election's name
	Leading  bool          // a leader holds it on a majority; the fields below are set only then
	Metadata string        // what the leader published (WithMetadata)
	Term     uint64        // the leader's term; 0 until its Campaign has written it back
	TTL      time.Duration // the leader's keys' time left on a majority (-1: no expiry)

	// token is the leader's: Observe tells leaders apart by it.
	token string
}

// Leader asks the nodes who leads the election name (Term 0 until the
// leader's Campaign has returned). It fails with ErrNoQuorum or ErrInvalid
// (a bad name, two nodes on one server), with a zero LeaderInfo.
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
// reports it, a leader only with its term) at once and at every change,
// woken by releases and asking every ObservePoll; it keeps the latest state
// only, and closes when ctx ends or after Close. A bad name is ErrInvalid.
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
		wake, leave = l.notify.Wait(ctx, name, l.cfg.nodeTimeout)
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
