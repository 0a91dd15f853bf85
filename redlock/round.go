package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// Rounds: every operation reaches the nodes the same way. It passes the
// guard (no round starts after Close), sends one script to every node
// through the node's pipe (sender), and lets quorum.Run count the votes
// (runRound); calls that are still out when the round is decided are
// stragglers, tracked on the Locker's background group until their replies
// come, so that Close waits for them and for their clean-up (settle,
// sendOn, undoAll).

// guard admits an operation that may start work on the Locker's background
// group (node calls that outlive it): it fails with ErrClosed after Close,
// and otherwise holds Close off until release is called, so that Close's
// Wait never races an Add on the group. The caller defers release.
func (l *Locker) guard() (release func(), err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return nil, ErrClosed
	}
	return l.unguard, nil
}

// closedErr is ErrClosed once the Locker is closed.
func (l *Locker) closedErr() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return nil
}

// startFunc queues node i's call of a round; reply receives its answer
// once (a quorum.Round's Start).
type startFunc[T any] = func(ctx context.Context, i int, reply func(int, quorum.Vote, T, error))

// round is one call to every node of a Locker, and how its votes count.
type round[T any] struct {
	// need is how many Yes votes make the round succeed; 0 is a majority.
	need int
	// timeout bounds every node's call.
	timeout time.Duration
	// waitAll waits for every node's answer (or the timeout) instead of
	// deciding as soon as the outcome is known.
	waitAll bool
	// linger is a quorum.Round's Linger: how much longer than timeout
	// the round waits for calls still out, unless ctx ends.
	linger time.Duration
	// decided is a quorum.Round's Decided: with waitAll, the round ends
	// as soon as it returns true.
	decided func(*quorum.Result[T]) bool
	// classify is a quorum.Round's Classify: a lost round waits for the
	// refusals that may still tell contention from outage.
	classify bool
	start    startFunc[T]
	// accept and late are a quorum.Round's Accept and Late.
	accept func(*quorum.Result[T]) bool
	late   func(quorum.Reply[T], bool)
}

// runRound runs rd on every node of l, its stragglers tracked on l's
// background group. The caller holds the guard (or a count on the group
// that keeps the node pipes open).
func runRound[T any](ctx context.Context, l *Locker, rd round[T]) quorum.Result[T] {
	need := rd.need
	if need == 0 {
		need = l.need
	}
	return quorum.Run(ctx, &quorum.Round[T]{
		Nodes:      len(l.nodes),
		Need:       need,
		Timeout:    rd.timeout,
		WaitAll:    rd.waitAll,
		Linger:     rd.linger,
		Decided:    rd.decided,
		Classify:   rd.classify,
		Start:      rd.start,
		Accept:     rd.accept,
		Late:       rd.late,
		Background: &l.bg,
	})
}

// call passes the guard and runs rd: a round that needs nothing else of
// the Locker while it runs.
func (l *Locker) call(ctx context.Context, rd round[int64]) (quorum.Result[int64], error) {
	release, err := l.guard()
	if err != nil {
		return quorum.Result[int64]{}, err
	}
	defer release()
	return runRound(ctx, l, rd), nil
}

// sender returns a round's start that sends script s with keys and args to
// each node through its pipe, the command line built once for all nodes;
// started, if set, is called once the call is queued on every node.
func (l *Locker) sender(timeout time.Duration, c scriptCall, decode decodeFunc, started func()) startFunc[int64] {
	sc := newNodeCall(timeout, c, decode)
	last := len(l.nodes) - 1
	inline := l.sendsInline()
	return func(_ context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
		sc.send(&l.nodes[i], i, reply, inline)
		if started != nil && i == last {
			started()
		}
	}
}

// undoAll makes the call undo (a lock kind's undo) on the nodes for which
// which(i) holds, in parallel through the nodes' pipes, and waits for them
// up to timeout. It undoes our own writes, so it runs even when ctx has
// ended.
func (l *Locker) undoAll(ctx context.Context, timeout time.Duration, undo scriptCall, which func(int) bool) {
	send := l.sender(timeout, undo, decodeAny, nil)
	runRound(context.WithoutCancel(ctx), l, round[int64]{
		need:    len(l.nodes),
		timeout: timeout,
		start: func(ctx context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
			if !which(i) {
				reply(i, quorum.Yes, 0, nil)
				return
			}
			// Best effort: a key left behind on an unreachable node expires
			// by its TTL; it delays others but never breaks exclusion.
			send(ctx, i, reply)
		},
	})
}

// sendsInline reports whether a round's caller sends its calls itself when
// a node's queue is idle, instead of handing them to the node's worker
// (see queue). Only with a single node: the caller then waits for that one
// reply anyway, so sending it costs no wait the round would not have. With
// more nodes, the caller would wait on the node it sends to even when a
// majority had answered without it (a hung node would hold every round up
// to the node timeout).
func (l *Locker) sendsInline() bool { return len(l.nodes) == 1 }

// askNodes sends call to every node that ask picks (nil: every node), each
// within timeout, and hands each node's raw reply to got, which may run on
// a straggler's goroutine after askNodes returned when ctx ended first. It
// returns once every picked node answered, timed out or ctx ended (every
// answer counts as a Yes, and the round needs them all): a query whose
// answers are facts to read, not votes to count. The caller holds the
// guard.
func (l *Locker) askNodes(ctx context.Context, timeout time.Duration, call scriptCall, ask func(i int) bool, got func(i int, c *redis.Cmd)) {
	cmd := conn.EvalSha(call.script, call.keys, call.args)
	runRound(ctx, l, round[int64]{
		need:    len(l.nodes),
		timeout: timeout,
		start: func(_ context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
			if ask != nil && !ask(i) {
				reply(i, quorum.Yes, 0, nil)
				return
			}
			l.nodes[i].sendRaw(timeout, call.script, call.keys, cmd, func(c *redis.Cmd) {
				got(i, c)
				reply(i, quorum.Yes, 0, nil)
			})
		},
	})
}
