package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/scripts"

	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
)

// node is one Redis master. Its scripts go through the pipe's own clients,
// never through the caller's.
type node struct {
	addr string // for messages; credentials removed
	pipe *pipe
}

// Multiplexing: every script call bound for a node goes through that node's
// pipe, two queues each served by one long-lived worker. A worker takes
// whatever has queued up, up to maxBatch calls, and sends it as one pipeline:
// one write and one read for all of them, instead of a round trip per call on
// a connection of its own. A key always maps to the same queue, so the calls
// for one key reach the node in the order they were made (a release never
// overtakes the acquisition it undoes); different keys proceed in parallel.
// Uncontended, a call goes out alone at once; under load, concurrent lock
// operations share round trips, and a round starts no goroutine per node
// (whose stacks would have to grow through the client's deep call path every
// time).
//
// Two queues per node. A Redis server runs one command at a time, so more
// connections buy no parallelism on the server, only smaller batches, each
// costing a write, a read and a wake-up on both sides: measured with the
// harness (64 workers, 5 nodes, on 2 local cores, side by side in one run),
// two queues made 1.2 to 1.8 times the pairs per second of four, and one
// queue up to 1.2 times that of two. But a single queue stops and waits:
// a call that arrives while the node's batch is out waits for its replies,
// a whole round trip on a real network. With two, a call for a key of the
// other queue goes out while the first batch's replies are on their way.
// Uncontended latency was the same with one, two and four.
const (
	workersPerNode = 2
	maxBatch       = 64
	// queueLen bounds the calls waiting in one queue: a node holds up to
	// 4096, a call from each of thousands of concurrent lock operations.
	queueLen = 2048
)

// errOverloaded is a node's answer when its queue is full: it is far behind
// (or hangs), and waiting in line would only exceed the node timeout.
var errOverloaded = errors.New("redlock: node overloaded: too many calls queued")

// nodeCall is one script call waiting in a node's queue.
type nodeCall struct {
	timeout time.Duration
	script  *scripts.Script
	keys    []string
	args    []any
	// cmd is the EVALSHA command line, built once per round and shared by
	// every node's call (read only).
	cmd    []any
	node   int
	decode decodeFunc
	reply  func(node int, v quorum.Vote, value int64, err error)
	// raw, if set instead of decode and reply, receives the reply as it is
	// (for scripts whose reply is not an integer).
	raw func(cmd *redis.Cmd)
}

var callPool = sync.Pool{New: func() any { return new(nodeCall) }}

// evalSha builds the EVALSHA command line of a script call, once for all
// nodes of a round.
func evalSha(s *scripts.Script, keys []string, args []any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.SHA, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return append(cmd, args...)
}

// evalSrc is the same call with the script's source, for a node that lost
// its script cache.
func evalSrc(c *nodeCall) []any {
	cmd := make([]any, len(c.cmd))
	copy(cmd, c.cmd)
	cmd[0], cmd[1] = "eval", c.script.Src
	return cmd
}

type pipe struct {
	// own is the pipe's private client, made from the caller's options
	// (see privateOptions), whose connections the workers hold one each.
	own *redis.Client
	// sub is the private client of the node's release subscription.
	sub    *redis.Client
	queues [workersPerNode]queue
	wg     sync.WaitGroup

	// ident tells the node's server apart from the other nodes' (see
	// servers); nil checks nothing. Set before the first call is queued.
	ident *nodeIdentity
	// route is where go-redis's log lines about the calls of the workers
	// go (see RedisLogger).
	route *redisRoute
	// dialed are the connections the pipe's client opened last, for the
	// workers to find their sockets in (see conncheck.go).
	dialed dialed
	// cause is why the last connection attempt failed, for error text.
	cause lastCause
	// replica is whether the server said it is a replica when a
	// connection last opened, for error text.
	replica atomic.Bool
}

// newPipe starts the pipe of the node that c names; timeout is the
// Locker's node timeout, route where go-redis's lines about its connections
// go.
func newPipe(c *redis.Client, timeout time.Duration, route *redisRoute) *pipe {
	// Clients of our own: their connections never mix with the caller's,
	// nothing we do changes the caller's client, and none of its settings
	// can make a script run twice or a wait outlast the node timeout.
	cmd, sub := privateOptions(c.Options(), timeout)
	p := &pipe{route: route}
	cmd.Dialer, sub.Dialer = p.dialed.note(routeDial(cmd.Dialer, route)), routeDial(sub.Dialer, route)
	p.own, p.sub = redis.NewClient(cmd), redis.NewClient(sub)
	p.wg.Add(workersPerNode)
	for i := range p.queues {
		q := &p.queues[i]
		q.ch = make(chan *nodeCall, queueLen)
		q.w.p, q.w.ctx = p, deadlineCtx{route: route}
		go p.work(q)
	}
	return p
}

// close stops the workers once the queues have drained. No call may be
// started after close.
func (p *pipe) close() {
	for i := range p.queues {
		close(p.queues[i].ch)
	}
	p.wg.Wait()
	// Their connections are ours alone; nothing to report.
	_ = p.own.Close()
	_ = p.sub.Close()
}

// start queues a call without blocking; reply receives its outcome exactly
// once, from a worker (or at once when the queue is full). The call runs
// with its own timeout, whatever becomes of the caller. cmd is the call's
// command line from evalSha, shared by the round.
//
// With inline set, the caller may send the call itself when its queue is
// idle (see trySend): start then returns after the reply, at most the
// call's timeout later. Only a caller that would wait for this reply
// anyway may ask for that (a round over a single node).
func (p *pipe) start(timeout time.Duration, node int, s *scripts.Script, keys []string, args, cmd []any,
	decode decodeFunc, reply func(int, quorum.Vote, int64, error), inline bool) {
	c := callPool.Get().(*nodeCall)
	*c = nodeCall{timeout: timeout, script: s, keys: keys, args: args, cmd: cmd, node: node, decode: decode, reply: reply}
	if inline && p.queues[queueOf(keys[0])].trySend(c) {
		return
	}
	p.enqueue(c)
}

// startRaw queues a call whose reply is handed over as it is.
func (p *pipe) startRaw(timeout time.Duration, s *scripts.Script, keys []string, args, cmd []any, raw func(*redis.Cmd)) {
	c := callPool.Get().(*nodeCall)
	*c = nodeCall{timeout: timeout, script: s, keys: keys, args: args, cmd: cmd, raw: raw}
	p.enqueue(c)
}

func (p *pipe) enqueue(c *nodeCall) {
	q := &p.queues[queueOf(c.keys[0])]
	// Counted before it is queued: a caller that finds the count at zero
	// knows that no call made before its own is still waiting to be sent.
	q.unsent.Add(1)
	select {
	case q.ch <- c:
	default:
		q.unsent.Add(-1)
		cmd := redis.NewCmd(context.Background())
		cmd.SetErr(errOverloaded)
		p.finish(c, cmd)
	}
}

// finish delivers a reply to the call's receiver and recycles the call.
func (p *pipe) finish(c *nodeCall, cmd *redis.Cmd) {
	if raw := c.raw; raw != nil {
		*c = nodeCall{}
		callPool.Put(c)
		raw(cmd)
		return
	}
	r, err := cmd.Int64()
	v, val, err := c.decode(r, err)
	reply, node := c.reply, c.node
	*c = nodeCall{}
	callPool.Put(c)
	reply(node, v, val, err)
}

// queueOf maps a key to one of a node's queues (FNV-1a).
func queueOf(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return int(h % workersPerNode)
}

// worker is the state of one queue's worker: its connection and a context
// whose deadline it moves for every batch.
type worker struct {
	p    *pipe
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
}

func (p *pipe) work(q *queue) {
	defer p.wg.Done()
	defer func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.w.drop()
	}()
	batch := make([]*nodeCall, 0, maxBatch)
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
		q.mu.Lock()
		cmds := q.w.send(batch)
		q.unsent.Add(-int32(len(batch)))
		q.mu.Unlock()
		q.w.deliver(batch, cmds)
		clear(batch)
	}
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
func (w *worker) exec(batch []*nodeCall) {
	w.deliver(batch, w.send(batch))
}

// deliver hands each call of a batch its reply.
func (w *worker) deliver(batch []*nodeCall, cmds []*redis.Cmd) {
	for i, c := range batch {
		w.p.finish(c, cmds[i])
	}
}

// send sends a batch and returns its replies, one per call. Every queued
// call is sent, even when its caller has given up: a round is decided at a
// majority, and the rest of its calls (the release of a key on the last
// nodes, say) must still reach their nodes; a late acquisition is undone by
// its round's Late.
func (w *worker) send(batch []*nodeCall) []*redis.Cmd {
	var timeout time.Duration
	for _, c := range batch {
		timeout = max(timeout, c.timeout)
	}
	// The batch has its own deadline, the longest node timeout in it: the
	// rounds decide on their own timers, and one caller's cancellation must
	// not fail the others' calls.
	now := time.Now()
	w.ctx.deadline = now.Add(timeout)
	ctx := &w.ctx
	if w.conn != nil && w.closedIdle(now) {
		// Nothing of this batch has gone out: it may go on a new
		// connection (see conncheck.go).
		w.abandon()
	}
	w.sentAt = now
	if w.conn == nil {
		// Nothing is sent on a connection before its server is known: a
		// node's vote never counts before its identity has been checked.
		if err := w.open(ctx); err != nil {
			cmds := make([]*redis.Cmd, len(batch))
			for i := range batch {
				cmds[i] = redis.NewCmd(ctx)
				cmds[i].SetErr(err)
			}
			return cmds
		}
		// The batch gets a node timeout of its own after the set-up round
		// trip: a slow node whose dial and set-up just fit would otherwise
		// fail every first batch, drop the connection and never recover.
		// The rounds decide on their own timers, so no caller waits longer.
		w.ctx.deadline = time.Now().Add(timeout)
	}
	cmds := make([]*redis.Cmd, len(batch))
	if len(batch) == 1 {
		cmds[0] = redis.NewCmd(ctx, batch[0].cmd...)
		_ = w.conn.Process(ctx, cmds[0]) // the error is the command's
	} else {
		pl := w.conn.Pipeline()
		for i, c := range batch {
			cmds[i] = redis.NewCmd(ctx, c.cmd...)
			_ = pl.Process(ctx, cmds[i])
		}
		if _, err := pl.Exec(ctx); err != nil {
			// Per-command errors are read below; but go-redis leaves an
			// error of the connection's setup (a wrong password, say) off
			// the commands of a pipeline: give it to those with no reply.
			for _, cmd := range cmds {
				if cmd.Err() == nil && cmd.Val() == nil {
					cmd.SetErr(err)
				}
			}
		}
	}
	// A node that lost its script cache while we stayed connected (SCRIPT
	// FLUSH) answers NOSCRIPT: send those calls again with the script's
	// source, which also caches it. They then run after the rest of their
	// batch; loading the scripts on every new connection (see open) keeps
	// that out of the usual case, a restart.
	for i, c := range batch {
		if err := cmds[i].Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			cmds[i] = redis.NewCmd(ctx, evalSrc(c)...)
			_ = w.conn.Process(ctx, cmds[i])
		}
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !keepsConn(err) {
			w.abandon()
			break
		}
	}
	return cmds
}

// keepsConn reports whether a connection that got err is still fit for the
// next batch: only an error reply about the command itself leaves it so.
// A network error, a timeout or a reply that made no sense leaves it
// unusable (unread replies may follow); and go-redis marks a connection
// bad on READONLY and then refuses every later command on it, so a node
// that was a replica for a moment would stay lost. The other replies say
// the server is not a usable master right now (loading, cut off from its
// master, a cluster in a changing state): a new connection, which learns
// the server's identity again, is the cheap and safe answer to all of them.
func keepsConn(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	if _, moved := redis.IsMovedError(err); moved {
		return false
	}
	if _, ask := redis.IsAskError(err); ask {
		return false
	}
	return !redis.IsReadOnlyError(err) && !redis.IsLoadingError(err) && !redis.IsMasterDownError(err) &&
		!redis.IsTryAgainError(err) && !redis.IsClusterDownError(err) &&
		!strings.HasPrefix(err.Error(), "redis: Conn is in a bad state")
}

// deadlineCtx is a worker's reusable context: it carries only a deadline,
// which go-redis turns into socket deadlines (the clients are expected to
// have ContextTimeoutEnabled), and the route of go-redis's log lines, and
// is never cancelled. Reusing it saves a context and a timer per call on
// the hot path.
type deadlineCtx struct {
	deadline time.Time
	route    *redisRoute
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return nil }
func (c *deadlineCtx) Err() error                  { return nil }
func (c *deadlineCtx) Value(key any) any {
	if _, ok := key.(routeKey); ok {
		return c.route
	}
	return nil
}
