package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
)

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
			if errors.Is(err, conn.ErrShed) && !errors.Is(err, conn.ErrSilent) {
				// Never sent, and nobody waited for it: the node gave no
				// answer to report. (A call not sent to a silent node
				// counted in its round: an error, as a timeout would be.)
				reply(n, v, val, err)
				return
			}
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
	l.noteNode(r.Node, r.Err)
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
		Abstained: errors.Is(nr.Err, ErrAbstained),
		Latency:   time.Since(began),
		Err:       nr.Err,
	})
}

// batchTrace follows the locks of one shared extension round (see
// extendMany), each as the Extend it stands for: an OpExtend begun in the
// context of the lock's work, every node's answer for its key, and its
// OpDone. A nil *batchTrace (no observer) does nothing, so that a round
// does no work per lock for observability when it is off.
type batchTrace struct {
	l    *Locker
	ctxs []context.Context // each lock's, as its OpStart returned it
	ops  []opTrace
}

// beginExtends starts an OpExtend for each keeper's lock, in the context of
// its work; nil without an observer.
func (o *observer) beginExtends(l *Locker, keepers []*keeper) *batchTrace {
	if o == nil {
		return nil
	}
	bt := &batchTrace{l: l, ctxs: make([]context.Context, len(keepers)), ops: make([]opTrace, len(keepers))}
	for i, kp := range keepers {
		bt.ctxs[i], bt.ops[i] = o.begin(kp.ctx, OpExtend, kp.k.key)
	}
	return bt
}

// now is the time, or the zero time without an observer.
func (bt *batchTrace) now() time.Time {
	if bt == nil {
		return time.Time{}
	}
	return time.Now()
}

// node reports node i's answer to a round that began at began, for each
// key it carried: keys[j] is the key of the which[j]-th lock, reply[j] the
// node's character for it (see extend_many.lua), or err the node's error.
func (bt *batchTrace) node(i int, began time.Time, keys []string, which []int, reply string, err error) {
	if bt == nil {
		return
	}
	for j, key := range keys {
		r := quorum.Reply[int64]{Node: i, Vote: quorum.Failed, Err: err}
		if err == nil {
			r.Vote, r.Value, r.Err = decodeCompare(manyCode(reply[j]), nil)
		}
		bt.l.nodeDone(bt.ctxs[which[j]], OpExtend, key, i, began, compareOutcome(r))
	}
}

// done reports the end of each lock's extension with its error.
func (bt *batchTrace) done(errs []error) {
	if bt == nil {
		return
	}
	for i := range bt.ops {
		bt.ops[i].done(bt.ctxs[i], errs[i])
	}
}
