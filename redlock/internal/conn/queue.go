package conn

import (
	"sync"
	"sync/atomic"
)

// queue is one of a node's queues: the calls waiting for its worker, and
// the connection they go out on.
//
// A caller whose call finds the queue idle (nothing unsent, nobody sending)
// may send it itself on the worker's connection (trySend): uncontended, a
// call then costs one round trip and no hand-off to the worker and back.
// Whoever sends holds mu, so calls never interleave on the connection; a
// call counts as unsent from before it is queued until it has been sent,
// so a caller that finds nothing unsent (under mu) knows every call made
// before its own has reached the node: calls for one key keep their order.
type queue struct {
	ch chan *Call
	// mu is held by whoever sends on w's connection: the worker for a
	// batch, or a caller for its own call.
	mu sync.Mutex
	// unsent counts the calls queued and not yet sent.
	unsent atomic.Int32
	w      worker
}

// trySend sends c at once, on the caller's goroutine, and delivers its
// reply, if the queue is idle and its connection open; it reports whether
// it did. It waits for the reply at most c's timeout (the connection is
// open: no dial and set-up round trip comes first).
func (q *queue) trySend(c *Call) bool {
	if q.unsent.Load() != 0 || !q.mu.TryLock() {
		return false
	}
	if q.unsent.Load() != 0 || q.w.conn == nil || q.w.p.role.retired.Load() {
		q.mu.Unlock()
		return false
	}
	one := [1]*Call{c}
	cmds := q.w.sendWatched(one[:])
	q.mu.Unlock()
	q.w.deliver(one[:], cmds)
	return true
}
