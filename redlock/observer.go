package redlock

import (
	"context"
	"strings"
	"time"

	"github.com/quorumlock/redlock/quorum"
)

// Observer sees what a Locker does, for metrics, traces or logs: every
// acquisition with its outcome, latency and wait, every sleep between
// attempts, every release with the time the lock was held, every extension,
// every loss signalled by KeepAlive or Do, every lock broken with
// ForceRelease, and every node's answer with its latency (an abstention of
// the restart guard among them). Give it to New
// with WithObserver; the OpenTelemetry adapter in the module
// github.com/quorumlock/redlock/redlockotel is one.
//
// The methods are called synchronously, from the goroutines named in their
// comments, many at once: an Observer must be safe for concurrent use, and
// must not block or take long, since the lock operation (or a node's
// connection, for NodeDone) waits for it. Hand slow work to a goroutine of
// your own. It must not call the Locker or its Locks. A panic in a method is
// not recovered. Without an observer none of this costs anything: no event
// is built and no clock is read.
//
// Embed NopObserver to implement only some methods.
type Observer interface {
	// OpStart is called when an operation begins, before any check of its
	// arguments, in the goroutine of the call: Obtain, TryObtain,
	// ObtainMulti, TryObtainMulti (and the acquisition of Do) with
	// OpObtain, Release and ReleaseAfter (and Do's release) with
	// OpRelease, Extend (and the extensions of KeepAlive and Do) with
	// OpExtend, Locker.ForceRelease with OpForceRelease. It returns the context the operation goes on with:
	// ctx itself, or a context derived from it that carries values only
	// (a span, say) and that the Observer never cancels. NodeDone, Waited
	// and OpDone of the operation then receive that context.
	OpStart(ctx context.Context, op Op, key string) context.Context
	// OpDone is called once per OpStart, when the operation returns, in
	// the same goroutine, with the context OpStart returned.
	OpDone(ctx context.Context, e OpEvent)
	// Waited is called each time Obtain has slept between two attempts
	// (for its retry timer, a release notification, a handoff or the end
	// of ctx), in the goroutine of the call.
	Waited(ctx context.Context, e WaitEvent)
	// NodeDone is called for each node's answer in the rounds of Obtain,
	// TryObtain, Release, Extend, Lock.TTL, handoffs and ForceRelease, in
	// the goroutine that delivers the node's replies, before the round
	// counts the answer. A node that answers after its round was decided (a
	// straggler, or a node that never answered before its call's timeout)
	// is reported when it does, which may be after OpDone.
	NodeDone(ctx context.Context, e NodeEvent)
	// Lost is called when KeepAlive (and so Do) tells the work that the
	// lock is lost, just before it cancels the work's context, in
	// KeepAlive's background goroutine. ctx is the work's context, the
	// one KeepAlive returns (derived from the one given to KeepAlive or
	// Do, so it carries the caller's values), not cancelled yet.
	Lost(ctx context.Context, e LossEvent)
}

// NopObserver does nothing; embed it in an Observer that implements only
// some of the methods.
type NopObserver struct{}

// OpStart returns ctx.
func (NopObserver) OpStart(ctx context.Context, _ Op, _ string) context.Context { return ctx }

// OpDone does nothing.
func (NopObserver) OpDone(context.Context, OpEvent) {}

// Waited does nothing.
func (NopObserver) Waited(context.Context, WaitEvent) {}

// NodeDone does nothing.
func (NopObserver) NodeDone(context.Context, NodeEvent) {}

// Lost does nothing.
func (NopObserver) Lost(context.Context, LossEvent) {}

// Op names an operation that an Observer sees.
type Op string

// The operations an Observer sees.
const (
	// OpObtain is Obtain, TryObtain, ObtainMulti, TryObtainMulti (whose
	// key is the lock's name, its keys joined by commas) and the
	// acquisition of Do.
	OpObtain Op = "obtain"
	// OpRelease is Release, ReleaseAfter and the release at the end of Do.
	OpRelease Op = "release"
	// OpExtend is Extend, and every extension of KeepAlive and Do.
	OpExtend Op = "extend"
	// OpTTL is Lock.TTL; it has node events only.
	OpTTL Op = "ttl"
	// OpHandoff is the round in which a Release hands the lock to a
	// waiting goroutine of the same Locker; it has node events only, with
	// the waiter's acquisition as their outcome, in the releaser's
	// context.
	OpHandoff Op = "handoff"
	// OpForceRelease is Locker.ForceRelease: the lock on the key was
	// broken, whoever held it. Its node events say where the key was
	// deleted (OutcomeOK) and where there was none (OutcomeMissing).
	OpForceRelease Op = "force-release"
)

// OpEvent is an operation that ended.
type OpEvent struct {
	// Op is the operation: OpObtain, OpRelease, OpExtend or
	// OpForceRelease.
	Op Op
	// Key is the lock key.
	Key string
	// Start is when the operation began, by the local clock.
	Start time.Time
	// Latency is how long the operation took.
	Latency time.Duration
	// Wait is, for OpObtain, the part of Latency not spent in the call's
	// own acquisition rounds: sleeping between attempts, waiting in line
	// behind this Locker's other waiters for the key, waiting for a
	// handoff. 0 for other operations.
	Wait time.Duration
	// Attempts is, for OpObtain, how many acquisition rounds the call ran
	// itself (a lock handed over by a Release is not one). 0 for other
	// operations.
	Attempts int
	// Held is, for OpRelease, how long the lock had been held when the
	// release began, counted from the end of the acquisition. 0 for other
	// operations.
	Held time.Duration
	// Fence is, for an OpObtain that succeeded with WithFencing, the
	// lock's fence; 0 otherwise.
	Fence uint64
	// Err is the operation's error, nil on success. errors.Is tells the
	// outcome: ErrNotObtained (contention), ErrNoQuorum (outage),
	// ErrLockNotHeld (with ErrLockExpired, ErrLockLost or ErrReleased),
	// ErrInvalid, ErrClosed, or a context's error.
	Err error
}

// WaitEvent is one sleep of Obtain between two attempts.
type WaitEvent struct {
	// Key is the lock key.
	Key string
	// Start is when the sleep began.
	Start time.Time
	// Duration is how long it lasted.
	Duration time.Duration
}

// NodeEvent is one node's answer in a round.
type NodeEvent struct {
	// Op is the round's operation: OpObtain, OpRelease, OpExtend, OpTTL,
	// OpHandoff or OpForceRelease.
	Op Op
	// Key is the lock key.
	Key string
	// Node is the node's index, in the order the clients were given.
	Node int
	// Addr is the node's address, credentials removed.
	Addr string
	// Outcome is what the node did: OutcomeOK, OutcomeHeldByOther,
	// OutcomeMissing (the key was not there) or OutcomeError.
	Outcome Outcome
	// Abstained is true when the node refused to vote under the restart
	// guard (an ABSTAIN error: it lost its memory, is not seeded, or may
	// evict keys). Outcome is then OutcomeError.
	Abstained bool
	// Latency is the time from the round's call to the node's answer,
	// queueing in the node's pipeline included.
	Latency time.Duration
	// Err is the node's error when Outcome is OutcomeError: a network
	// error, a timeout, an error reply.
	Err error
}

// LossEvent is a loss that KeepAlive signalled to the work.
type LossEvent struct {
	// Key is the lock key.
	Key string
	// Cause is the cause the work's context is cancelled with; it matches
	// ErrLockLost, and ErrLockExpired when no extension reached a majority
	// in time.
	Cause error
	// Left is how long the lock's validity (Until) still had to run when
	// the work was told; negative if it had passed.
	Left time.Duration
}

// WithObserver gives the Locker an Observer that sees its operations (see
// Observer). It is a property of the Locker: give it to New; given to one
// call, or nil, it is an error matching ErrInvalid. Default none.
func WithObserver(o Observer) Option {
	return func(c *config) { c.obs = &observer{o: o} }
}

// observer holds the Locker's Observer. A nil *observer observes nothing,
// and each of its methods then returns at once, reading no clock and
// building nothing: the cost of observability when it is off.
type observer struct{ o Observer }

// opTrace follows one operation for its OpDone; the zero opTrace (no
// observer) does nothing.
type opTrace struct {
	o        Observer
	op       Op
	key      string
	start    time.Time
	rounds   time.Duration // spent in own acquisition rounds
	attempts int
}

// begin starts following op on key and returns the context the operation
// goes on with.
func (o *observer) begin(ctx context.Context, op Op, key string) (context.Context, opTrace) {
	if o == nil {
		return ctx, opTrace{}
	}
	start := time.Now()
	if c := o.o.OpStart(ctx, op, key); c != nil {
		ctx = c
	}
	return ctx, opTrace{o: o.o, op: op, key: key, start: start}
}

// now is the time, or the zero time without an observer.
func (t *opTrace) now() time.Time {
	if t.o == nil {
		return time.Time{}
	}
	return time.Now()
}

// attempted counts an acquisition round that began at start.
func (t *opTrace) attempted(start time.Time) {
	if t.o == nil {
		return
	}
	t.attempts++
	t.rounds += time.Since(start)
}

// waited reports a sleep that began at start.
func (t *opTrace) waited(ctx context.Context, start time.Time) {
	if t.o == nil {
		return
	}
	t.o.Waited(ctx, WaitEvent{Key: t.key, Start: start, Duration: time.Since(start)})
}

// event is the OpEvent of the operation ending now with err.
func (t *opTrace) event(err error) OpEvent {
	return OpEvent{Op: t.op, Key: t.key, Start: t.start, Latency: time.Since(t.start), Err: err}
}

// obtained reports the end of an acquisition.
func (t *opTrace) obtained(ctx context.Context, lock *Lock, err error) {
	if t.o == nil {
		return
	}
	e := t.event(err)
	e.Attempts = t.attempts
	e.Wait = max(e.Latency-t.rounds, 0)
	if lock != nil && err == nil {
		e.Fence = lock.fence
	}
	t.o.OpDone(ctx, e)
}

// released reports the end of k's release.
func (t *opTrace) released(ctx context.Context, k *Lock, err error) {
	if t.o == nil {
		return
	}
	e := t.event(err)
	if !k.since.IsZero() {
		e.Held = t.start.Sub(k.since)
	}
	t.o.OpDone(ctx, e)
}

// done reports the end of an operation without details of its own.
func (t *opTrace) done(ctx context.Context, err error) {
	if t.o == nil {
		return
	}
	t.o.OpDone(ctx, t.event(err))
}

// now is the time, or the zero time without an observer.
func (o *observer) now() time.Time {
	if o == nil {
		return time.Time{}
	}
	return time.Now()
}

// lost reports that KeepAlive tells k's work of a loss with cause.
func (o *observer) lost(ctx context.Context, k *Lock, cause error) {
	if o == nil {
		return
	}
	o.o.Lost(ctx, LossEvent{Key: k.key, Cause: cause, Left: time.Until(k.Until())})
}

// invalid reports whether WithObserver was given nil.
func (o *observer) invalid() bool { return o != nil && o.o == nil }

// perCall rejects an observer given to a call instead of New (lockers is
// the Locker's).
func (o *observer) perCall(lockers *observer) error {
	if o != lockers {
		return invalid("WithObserver is a property of the Locker: give it to New")
	}
	return nil
}

// observeNodes wraps the Start of a round of op on key so that each
// node's answer reaches the observer; without one, or for an op whose
// rounds are not observed node by node, it returns start itself.
func (l *Locker) observeNodes(op Op, key string, start startFunc[int64]) startFunc[int64] {
	o := l.cfg.obs
	if o == nil {
		return start
	}
	var outcome func(quorum.Reply[int64]) NodeResult
	switch op {
	case OpObtain:
		outcome = acquireOutcome
	case OpRelease, OpExtend, OpTTL:
		outcome = compareOutcome
	case OpForceRelease:
		outcome = forceOutcome
	default:
		return start
	}
	return func(ctx context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
		began := time.Now()
		start(ctx, i, func(n int, v quorum.Vote, val int64, err error) {
			if err != nil {
				v = quorum.Failed
			}
			nr := outcome(quorum.Reply[int64]{Node: n, Vote: v, Value: val, Err: err})
			l.nodeDone(ctx, op, key, n, began, nr)
			reply(n, v, val, err)
		})
	}
}

// handoffNode reports a node's answer r to a handoff round that began at
// began: the waiter's acquisition is its outcome.
func (l *Locker) handoffNode(ctx context.Context, key string, began time.Time, r quorum.Reply[handoffReply]) {
	if l.cfg.obs == nil {
		return
	}
	if r.Err != nil {
		r.Vote = quorum.Failed
	}
	l.nodeDone(ctx, OpHandoff, key, r.Node, began, acquireOutcome(acquireVote(r)))
}

func (l *Locker) nodeDone(ctx context.Context, op Op, key string, i int, began time.Time, nr NodeResult) {
	l.cfg.obs.o.NodeDone(ctx, NodeEvent{
		Op:        op,
		Key:       key,
		Node:      i,
		Addr:      l.nodes[i].addr,
		Outcome:   nr.Outcome,
		Abstained: nr.Err != nil && strings.HasPrefix(nr.Err.Error(), "ABSTAIN"),
		Latency:   time.Since(began),
		Err:       nr.Err,
	})
}
