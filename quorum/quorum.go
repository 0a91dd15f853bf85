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

// runState is one round of Run: the result the coordinator builds, and the
// replies on their way to it.
type runState[T any] struct {
	rd *Round[T]
	// mu guards decided and, once decided, res.OK. decided is set when
	// the coordinator has stopped reading replies; from then on a call
	// hands its reply to Late instead. replies is buffered to the number
	// of nodes, so a sender never blocks.
	mu      sync.Mutex
	decided bool
	replies chan Reply[T]
	res     Result[T]
	pending int
	// buf holds the replies of a round of up to 8 nodes.
	buf [8]Reply[T]
}

// reply is the reply func given to every call.
func (st *runState[T]) reply(i int, vote Vote, v T, err error) {
	if st.rd.Background != nil {
		defer st.rd.Background.Done()
	}
	if err != nil {
		vote = Failed
	}
	rep := Reply[T]{Node: i, Vote: vote, Value: v, Err: err}
	st.mu.Lock()
	if !st.decided {
		st.replies <- rep
		st.mu.Unlock()
		return
	}
	ok := st.res.OK
	st.mu.Unlock()
	if st.rd.Late != nil {
		st.rd.Late(rep, ok)
	}
}

// await reads the replies until the outcome is decided, or the round's
// timeout has passed (and, with Linger, the lingering has ended).
func (st *runState[T]) await(ctx context.Context) Result[T] {
	rd := st.rd
	st.pending = rd.Nodes
	// Replies already in (a call sent by its caller, say) may decide the
	// round before any timer is needed.
	st.drain()
	if st.settled() {
		return st.decide()
	}
	timer := getTimer(rd.Timeout)
	defer putTimer(timer)
	lingering := false
	var done <-chan struct{} // ctx's, once lingering
	for {
		select {
		case rep := <-st.replies:
			st.record(rep)
		case <-timer.C:
			if lingering || rd.Linger <= 0 {
				return st.giveUp(ErrTimeout)
			}
			if err := ctx.Err(); err != nil {
				return st.giveUp(err)
			}
			// A fired timer is reset from empty: its tick was received.
			lingering, done = true, ctx.Done()
			timer.Reset(rd.Linger)
		case <-done:
			return st.giveUp(ctx.Err())
		}
		if st.settled() {
			return st.decide()
		}
	}
}

// giveUp decides the round with everyone still silent counted as failed
// with err; their replies go to Late. It marks them and decides in one
// hold of mu, so that no reply can come in between and be counted twice.
func (st *runState[T]) giveUp(err error) Result[T] {
	res := &st.res
	st.mu.Lock()
	defer st.mu.Unlock()
	st.drain()
	for i := range res.Replies {
		if res.Replies[i].Vote == Pending {
			res.Replies[i].Vote, res.Replies[i].Err = Failed, err
			res.Failed++
			st.pending--
		}
	}
	return st.finish()
}

// drain records the replies already in. The coordinator is the only
// receiver: a reply counted by len is there to take.
func (st *runState[T]) drain() {
	for len(st.replies) > 0 {
		st.record(<-st.replies)
	}
}

func (st *runState[T]) record(rep Reply[T]) {
	st.res.Add(rep)
	st.pending--
}

// settled reports whether the replies so far decide the round.
func (st *runState[T]) settled() bool {
	rd, res := st.rd, &st.res
	switch {
	case st.pending == 0:
		return true
	case rd.WaitAll:
		return rd.Decided != nil && rd.Decided(res)
	case res.Yes >= rd.Need:
		return true
	case res.Yes+st.pending >= rd.Need:
		return false
	}
	// Lost. With Classify, not before the No votes still to come could
	// no longer change why.
	spare := rd.Nodes - rd.Need
	return !rd.Classify || res.No > spare || res.No+st.pending <= spare
}

// decide ends the round: replies that arrived while it was deciding are
// part of it, later ones go to Late.
func (st *runState[T]) decide() Result[T] {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.drain()
	return st.finish()
}

// finish decides on the replies recorded, with mu held: from then on
// replies go to Late.
func (st *runState[T]) finish() Result[T] {
	if st.res.Yes >= st.rd.Need {
		st.res.OK = st.rd.Accept == nil || st.rd.Accept(&st.res)
	}
	st.decided = true
	return st.res
}

// timers are the rounds' timeout timers, reused: a round is decided long
// before its timer fires, and a timer is two allocations. Only a timer
// stopped before it fired is reused, so no stale tick can be received,
// whatever the program's asynctimerchan setting.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	if t.Stop() {
		timers.Put(t)
	}
}

// Each calls fn for every node in parallel and returns when every call has
// returned, or when timeout has passed, whichever comes first. Calls still
// running then are tracked by background, if it is set. It serves clean-up
// work whose outcome decides nothing, such as undoing a failed acquisition.
func Each(ctx context.Context, nodes int, timeout time.Duration, background *sync.WaitGroup, fn func(ctx context.Context, node int)) {
	Run(ctx, &Round[struct{}]{
		Nodes:   nodes,
		Need:    nodes,
		Timeout: timeout,
		Call: func(ctx context.Context, node int) (Vote, struct{}, error) {
			fn(ctx, node)
			return Yes, struct{}{}, nil
		},
		Background: background,
	})
}
