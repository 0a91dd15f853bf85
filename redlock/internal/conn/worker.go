package conn

import (
	"errors"
	"math"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// worker is the state of one queue's worker: its connection and a context
// whose deadline it moves for every batch.
type worker struct {
	p    *Pipe
	conn *redis.Conn
	ctx  deadlineCtx
	// id is the connection's identity on its server, learned when it was
	// opened; stale is that of the connection it replaced, dropped with
	// calls in flight, until the server has killed it (see open).
	id, stale connID
	// netConn is conn's socket as the dialer made it, nil when unknown
	// (see conncheck.go), and sentAt when the last batch went out on it.
	netConn net.Conn
	sentAt  time.Time
	// fn is whether the server had the guard's function library when the
	// connection opened (see open): calls whose script has a function are
	// then sent as FCALL.
	fn bool
	// silentSince is when (Unix ns) the worker began to wait on the node
	// without hearing from it since, through batches that timed out (0:
	// the node answered, or refused, the last one); probeAt is when the
	// next acquisition may go out to see whether the node answers again
	// (see Pipe.Start): never while a batch is out, a node timeout after
	// the last one ended. Written by whoever sends (under the queue's mu),
	// read by Start.
	silentSince, probeAt atomic.Int64
	// refusal is the node's last quick refusal of a new connection (a
	// refused dial, a reset set-up, LOADING on a fresh connection), or
	// its last READONLY (see readOnly),
	// answered to every batch until retryAt instead of another dial;
	// backoff is the wait it set, doubled by each refusal in a row (see
	// refused). Under the queue's mu.
	refusal error
	retryAt time.Time
	backoff time.Duration
}

func (p *Pipe) work(q *queue) {
	defer p.wg.Done()
	defer func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.w.drop()
	}()
	batch := make([]*Call, 0, maxBatch)
	for c := range q.ch {
		batch = append(batch[:0], c)
	fill:
		for len(batch) < maxBatch {
			select {
			case c, ok := <-q.ch:
				if !ok {
					break fill
				}
				batch = append(batch, c)
			default:
				break fill
			}
		}
		// Shed at the last moment, once the connection is ours: a call
		// may have waited for it (a caller sending on it, see trySend).
		q.mu.Lock()
		k, why := p.sendable(batch, shed(batch))
		var cmds []*redis.Cmd
		if k > 0 {
			cmds = q.w.sendWatched(batch[:k])
		}
		q.unsent.Add(-int32(len(batch)))
		q.mu.Unlock()
		for _, c := range batch[k:] {
			c.fail(why)
		}
		q.w.deliver(batch[:k], cmds)
		clear(batch)
	}
}

// shed moves the calls of batch that are to be shed (Call.Shed,
// Call.Expires) behind the others, which keep their order, marks them
// (Call.Unsent), and returns how many calls it kept.
func shed(batch []*Call) int {
	k := 0
	var now time.Time
	for i, c := range batch {
		drop := c.Shed != nil && c.Shed.Load()
		if !drop && c.Expires {
			if now.IsZero() {
				now = time.Now()
			}
			drop = now.Sub(c.queued) > c.Timeout
		}
		if !drop {
			batch[k], batch[i] = batch[i], batch[k]
			k++
			continue
		}
		if c.Unsent != nil {
			c.Unsent.Store(true)
		}
	}
	return k
}

// drop closes the worker's connection (it is discarded, never reused).
func (w *worker) drop() {
	if w.conn != nil {
		_ = w.conn.Close()
		w.conn = nil
	}
	w.netConn = nil
}

// abandon drops a connection that may still have calls in flight: the
// next connection's first command kills it on the server.
func (w *worker) abandon() {
	if w.id.client != 0 {
		w.stale = w.id
	}
	w.id = connID{}
	w.drop()
}

// exec sends a batch and delivers every reply.
func (w *worker) exec(batch []*Call) {
	w.deliver(batch, w.sendWatched(batch))
}

// sendWatched is send, keeping the record of the node's silence (see
// worker.silence): a batch that timed out with no reply extends it; any
// reply of the server's ends it (an error reply too), and so does an
// error that came before the timeout (a refused dial, say: such calls fail
// fast on their own).
func (w *worker) sendWatched(batch []*Call) []*redis.Cmd {
	var timeout time.Duration
	for _, c := range batch {
		timeout = max(timeout, c.Timeout)
	}
	start := time.Now()
	if w.silentSince.Load() == 0 {
		w.silentSince.Store(start.UnixNano())
	}
	w.probeAt.Store(math.MaxInt64)
	cmds := w.send(batch, timeout, start)
	end := time.Now()
	if end.Sub(start) < timeout || answered(cmds) {
		w.silentSince.Store(0)
		w.probeAt.Store(0)
	} else {
		w.probeAt.Store(end.Add(timeout).UnixNano())
	}
	return cmds
}

// answered reports whether the server replied to any of cmds.
func answered(cmds []*redis.Cmd) bool {
	for _, cmd := range cmds {
		var re redis.Error
		if err := cmd.Err(); err == nil || errors.As(err, &re) {
			return true
		}
	}
	return false
}

// deliver hands each call of a batch its reply, and tells a cluster's
// link of a redirect among them.
func (w *worker) deliver(batch []*Call, cmds []*redis.Cmd) {
	if w.p.redirected != nil {
		for _, cmd := range cmds {
			// A redirect, a master that stopped answering or one that
			// became a replica (it may have failed over).
			var re redis.Error
			err := cmd.Err()
			if Redirected(err) || redis.IsReadOnlyError(err) || err != nil && !errors.As(err, &re) && !errors.Is(err, ErrShed) {
				w.p.redirected()
				break
			}
		}
	}
	for i, c := range batch {
		c.Reply.Reply(cmds[i])
	}
}

// send sends a batch and returns its replies, one per call. Every queued
// call is sent, even when its caller has given up: a round is decided at a
// majority, and the rest of its calls (the release of a key on the last
// nodes, say) must still reach their nodes; a late acquisition is undone by
// its round's Late. The one exception is a call shed before it was taken
// (Call.Shed, Call.Expires, see work): an acquisition of an attempt that
// had failed, or that waited past its node timeout. And a batch of the
// moment after the node refused a new connection gets that refusal without
// a new try (see refused).
func (w *worker) send(batch []*Call, timeout time.Duration, now time.Time) []*redis.Cmd {
	// The batch has its own deadline, timeout, the longest node timeout in
	// it (sendWatched), from now: the rounds decide on their own timers,
	// and one caller's cancellation must not fail the others' calls.
	w.ctx.deadline = now.Add(timeout)
	if w.conn != nil && w.closedIdle(now) {
		// Nothing of this batch has gone out: it may go on a new
		// connection (see conncheck.go).
		w.abandon()
	}
	w.sentAt = now
	fresh := w.conn == nil
	if fresh {
		if err := w.reconnect(timeout, now); err != nil {
			return failed(&w.ctx, len(batch), err)
		}
	}
	cmds := w.process(batch)
	w.resendUncached(batch, cmds)
	w.settleConn(cmds, fresh, timeout, now)
	return cmds
}

// reconnect opens a new connection for a batch that has none, and returns
// the error that fails the batch: the node's last refusal when it refused
// a moment ago (see refused), or the failure of this dial or set-up.
func (w *worker) reconnect(timeout time.Duration, now time.Time) error {
	if now.Before(w.retryAt) {
		// The node refused the last try a moment ago: answer its refusal
		// again rather than dial for every batch (see refused).
		return w.refusal
	}
	// Nothing is sent on a connection before its server is known: a
	// node's vote never counts before its identity has been checked.
	// The dial and set-up (a TLS handshake, the scripts' loading) may
	// take longer than the node timeout, which is sized for one call:
	// they get the client's DialTimeout, so that a node far away
	// connects once and votes from then on, instead of failing every
	// attempt at the node timeout. The batch's rounds decide on their
	// own timers meanwhile; its calls go out late, as any queued call.
	if !w.p.setups.closing() {
		w.ctx.deadline = now.Add(max(timeout, w.p.setup))
	}
	stop, stopWatch := w.p.cause.slowSetUp(timeout), w.p.watchSlowTLS(timeout)
	err := w.connect(&w.ctx)
	stop()
	stopWatch()
	if err != nil {
		w.refused(err, now, timeout)
		return err
	}
	// The batch gets a node timeout of its own after the set-up.
	w.ctx.deadline = time.Now().Add(timeout)
	return nil
}

// process sends the batch's calls on the connection, alone or in one
// pipeline, and returns their commands, each with its reply or error.
func (w *worker) process(batch []*Call) []*redis.Cmd {
	ctx := &w.ctx
	cmds := make([]*redis.Cmd, len(batch))
	for i, c := range batch {
		cmds[i] = redis.NewCmd(ctx, w.line(c)...)
	}
	if len(cmds) == 1 {
		_ = w.conn.Process(ctx, cmds[0]) // the error is the command's
		return cmds
	}
	pl := w.conn.Pipeline()
	for _, cmd := range cmds {
		_ = pl.Process(ctx, cmd)
	}
	if _, err := pl.Exec(ctx); err != nil {
		// Per-command errors are read by the caller; but go-redis leaves
		// an error of the connection's setup (a wrong password, say) off
		// the commands of a pipeline: give it to those with no reply.
		for _, cmd := range cmds {
			if cmd.Err() == nil && cmd.Val() == nil {
				cmd.SetErr(err)
			}
		}
	}
	return cmds
}

// resendUncached sends again, with the script's source, the calls of the
// batch that the node could not run from its cache, and puts their new
// commands in cmds.
//
// A node that lost its script cache while we stayed connected (SCRIPT
// FLUSH) answers NOSCRIPT: those calls go again with the script's source,
// which also caches it. They then run after the rest of their batch;
// loading the scripts on every new connection (see open) keeps that out of
// the usual case, a restart.
// A node that lost the guard's function library the same way (or a server
// restarted without persistence behind a proxy that kept the connection)
// answers that the function is not found: those calls go again as
// scripts, which guard as the functions do, and the library is loaded
// again for the next batches. A function refused by an ACL (NOPERM) goes
// again as a script too, and the connection stops sending FCALL.
func (w *worker) resendUncached(batch []*Call, cmds []*redis.Cmd) {
	ctx := &w.ctx
	reload := false
	for i, c := range batch {
		err := cmds[i].Err()
		if err == nil {
			continue
		}
		msg := err.Error()
		viaFn := w.fn && c.Script.Fn != ""
		switch {
		case viaFn && strings.HasPrefix(msg, "NOPERM"):
			w.fn = false
		case viaFn && strings.Contains(msg, "Function not found"):
			reload = true
		case !strings.HasPrefix(msg, "NOSCRIPT"):
			continue
		}
		cmds[i] = redis.NewCmd(ctx, evalSrc(c)...)
		_ = w.conn.Process(ctx, cmds[i])
	}
	if reload && w.fn {
		w.fn = loaded(w.conn.FunctionLoad(ctx, scripts.Library).Err())
	}
}

// line is the command line of call c on this connection: its EVALSHA
// line, or with the script's function on a server that has the library,
// the same line as FCALL.
func (w *worker) line(c *Call) []any {
	if !w.fn || c.Script == nil || c.Script.Fn == "" {
		return c.Cmd
	}
	// The FCALL line EvalSha put beyond c.Cmd, or else one built now.
	if fc := c.Cmd[len(c.Cmd):cap(c.Cmd)]; len(fc) > 3 && fc[0] == "fcall" {
		return fc
	}
	return c.Script.AppendFCall(nil, c.Cmd)
}
