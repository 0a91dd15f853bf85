package quorum

import (
	"context"
	"sync"
	"time"
)

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
