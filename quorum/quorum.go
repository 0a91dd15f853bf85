// Package quorum sends one call to each of N nodes in parallel and decides,
// as soon as the outcome is known, whether enough of them agreed.
//
// It knows nothing about Redis: a call is any function of a node index that
// answers Yes, No or Failed. Run returns when Need nodes said Yes, or as soon
// as so many said otherwise (or stayed silent past the timeout) that Need can
// no longer be reached. It never waits for a slow or dead node once the outcome
// is decided; calls still in flight then finish in the background, and each of
// their replies is handed to the round's Late callback, so the caller can undo
// what a late node did (a SET whose reply came after the decision).
package quorum

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Vote is one node's answer in a round.
type Vote uint8

const (
	// Pending means the node had not answered when the round was decided.
	Pending Vote = iota
	// Yes means the node did what was asked (granted, released, extended).
	Yes
	// No means the node answered and refused (the key is held by another).
	No
	// Failed means the call returned an error or did not finish in time.
	Failed
)

// String names the vote: "pending", "yes", "no" or "failed".
func (v Vote) String() string {
	switch v {
	case Pending:
		return "pending"
	case Yes:
		return "yes"
	case No:
		return "no"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// ErrTimeout is the error of a node that did not answer within the round's
// timeout. Its call keeps running; its reply, if any, goes to Late.
var ErrTimeout = errors.New("quorum: node timeout")

// Majority returns the smallest number of nodes out of n that forms a
// majority: n/2 + 1.
func Majority(n int) int { return n/2 + 1 }

// Reply is what one node answered.
type Reply[T any] struct {
	Node  int
	Vote  Vote
	Value T
	Err   error
}

// Result is the outcome of a round.
type Result[T any] struct {
	// Replies holds one entry per node, indexed by node. A node that had not
	// answered by the decision has Vote Pending, or Failed with ErrTimeout when
	// the timeout decided the round.
	Replies []Reply[T]
	// Yes, No and Failed count the votes in Replies.
	Yes, No, Failed int
	// OK is true when Need nodes said Yes and Accept (if any) accepted.
	OK bool
}

// Add puts a node's reply in its slot of Replies and counts its vote (a
// Pending one counts nowhere). The slot must not hold a counted reply yet.
func (r *Result[T]) Add(rep Reply[T]) {
	r.Replies[rep.Node] = rep
	switch rep.Vote {
	case Yes:
		r.Yes++
	case No:
		r.No++
	case Failed:
		r.Failed++
	}
}

// Pending returns how many nodes had not answered when the round was
// decided.
func (r *Result[T]) Pending() int { return len(r.Replies) - r.Yes - r.No - r.Failed }

// Round describes one parallel call to every node.
type Round[T any] struct {
	// Nodes is how many nodes are called, with indexes 0..Nodes-1.
	Nodes int
	// Need is how many Yes votes make the round succeed, usually
	// Majority(Nodes). It must be between 1 and Nodes.
	Need int
	// Timeout bounds each call: a node that has not answered by then counts as
	// Failed with ErrTimeout. Each call's context also carries this deadline.
	Timeout time.Duration
	// Call does the work on one node. It runs in its own goroutine.
	// Exactly one of Call and Start must be set.
	Call func(ctx context.Context, node int) (Vote, T, error)
	// Start, instead of Call, starts the work on one node without blocking
	// and arranges for reply to be called exactly once, from any goroutine,
	// with the node's answer. It suits callers that keep their own workers
	// per node (to pipeline many rounds' calls), so that a round starts no
	// goroutine at all. The round's Timeout still decides for silent nodes;
	// Start must bound its own work (ctx carries no deadline of the round).
	// Run calls Start for nodes 0, 1, ... Nodes-1 in that order, from its
	// own goroutine, before it waits for any reply.
	Start func(ctx context.Context, node int, reply func(node int, v Vote, value T, err error))
	// WaitAll makes the round wait for every node's answer (or the
	// timeout) instead of deciding as soon as the outcome is known; a read
	// that must see every write acknowledged so far wants that.
	WaitAll bool
	// Decided, if set with WaitAll, ends that wait early: it is called
	// after each reply (in Run's goroutine) and the round is decided as
	// soon as it returns true, the nodes still silent left Pending. A
	// round whose replies each decide many things (one per key, say)
	// waits only until every one of them is known.
	Decided func(r *Result[T]) bool
	// Linger, if positive, makes a round that reaches its Timeout with
	// calls still out wait up to Linger more for their answers, unless ctx
	// has ended (then, or when ctx ends while it lingers, the calls still
	// out count as Failed with ctx's error). It suits calls that may be slow
	// to go out (queued behind others) but are not lost, so that the round
	// reports what they did. Within Timeout, ctx is only handed to the calls
	// (with Call, their ctx then lasts Timeout+Linger).
	Linger time.Duration
	// Classify, if set, keeps a round that can no longer succeed open
	// (up to Timeout) while the nodes still silent could tell why it
	// failed: while the No votes in hand do not by themselves rule out
	// Need (No <= Nodes-Need) but those still to come could. A caller
	// that reports refusal (No) apart from failure then counts every No
	// that arrives in time, whichever node answered first.
	Classify bool
	// Accept, if set, is called once, when Need nodes said Yes, before the
	// round is decided; returning false turns the success into a failure (the
	// lock's validity ran out, say). Late replies then see ok == false.
	Accept func(r *Result[T]) bool
	// Late, if set, receives each reply that arrives after the decision, with
	// the round's final OK, in the goroutine of that node's call.
	Late func(r Reply[T], ok bool)
	// Background, if set, tracks the calls that outlive Run: Add is called
	// before each is started and Done after its Late returns, so an owner can
	// wait for every straggler before it shuts down.
	Background *sync.WaitGroup
}

// inflight counts the calls still running; the last one cancels their
// shared context.
type inflight struct {
	left   atomic.Int32
	cancel context.CancelFunc
}

func (f *inflight) done() {
	if f.left.Add(-1) == 0 {
		f.cancel()
	}
}

// Run calls rd.Call for every node in parallel and returns as soon as the
// outcome is decided; see the package comment. One failing or dead node does
// not cancel the others: each call has only its own deadline (and ctx).
func Run[T any](ctx context.Context, rd *Round[T]) Result[T] {
	n := rd.Nodes
	// One allocation for the round's state, which the calls' reply func
	// shares with the coordinator (and late replies outlive the round):
	// rounds are the hot path.
	st := &runState[T]{rd: rd, replies: make(chan Reply[T], n)}
	if n <= len(st.buf) {
		st.res.Replies = st.buf[:n]
	} else {
		st.res.Replies = make([]Reply[T], n)
	}
	for i := range st.res.Replies {
		st.res.Replies[i].Node = i
	}
	if rd.Background != nil {
		rd.Background.Add(n)
	}
	reply := st.reply
	if rd.Start != nil {
		for i := range n {
			rd.Start(ctx, i, reply)
		}
	} else {
		// The calls share callCtx; the last one to finish cancels it, not
		// the decision, so stragglers still run to their own deadline: the
		// round's Timeout, and its Linger, which would be pointless if the
		// calls had stopped at the Timeout.
		var calls inflight
		calls.left.Store(int32(n))
		callCtx, cancel := context.WithTimeout(ctx, rd.Timeout+max(rd.Linger, 0))
		calls.cancel = cancel
		for i := range n {
			go func() {
				defer calls.done()
				vote, v, err := rd.Call(callCtx, i)
				reply(i, vote, v, err)
			}()
		}
	}
	return st.await(ctx)
}
