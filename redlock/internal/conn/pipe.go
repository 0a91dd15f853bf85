package conn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

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
	WorkersPerNode = 2
	maxBatch       = 64
	// queueLen bounds the calls waiting in one queue: a node holds up to
	// 4096, a call from each of thousands of concurrent lock operations.
	queueLen = 2048
)

// ErrOverloaded is a node's answer when its queue is full: it is far behind
// (or hangs), and waiting in line would only exceed the node timeout.
var ErrOverloaded = errors.New("redlock: node overloaded: too many calls queued")

// Call is one script call on one node: what a pipe queues and sends.
type Call struct {
	// Timeout bounds the call on the node, whatever becomes of its caller.
	Timeout time.Duration
	Script  *scripts.Script
	// Keys are the script's keys; the first chooses the queue, unless
	// Queue is set.
	Keys []string
	// Queue, when set, chooses the queue instead: calls that must reach
	// the node in the order they were sent, but whose first keys differ,
	// share one.
	Queue string
	// Cmd is the EVALSHA command line (see EvalSha), built once for all
	// nodes of a round and shared by their calls (read only, its array
	// beyond its length included).
	Cmd []any
	// Reply receives the call's outcome exactly once, from a worker or
	// from the caller's own goroutine; the pipe does not touch the call
	// after that.
	Reply Replier
	// Shed, when set and true by the time a worker takes the call, keeps
	// the call from going out: it is answered ErrShed. Only for calls that
	// may safely never reach the node, such as the acquisitions of an
	// attempt that has failed (a node that never got one holds nothing),
	// so that work nobody waits for leaves the queue at no cost.
	Shed *atomic.Bool
	// Expires sheds the call also once it has waited in its queue longer
	// than its Timeout: its round has counted the node as not answering
	// by then, and sending it would only make the calls behind it later.
	// For acquisitions only (never for an undo, which must go out). Such
	// a call is not even queued while the worker has waited longer than
	// its Timeout on a node that answers nothing (ErrSilent).
	Expires bool
	// Unsent, if set, is set true when the call is shed, before the
	// worker looks at any call queued after it: the Shed of this call's
	// undo, so that the undo of a call never sent is not sent either.
	Unsent *atomic.Bool
	queued time.Time
}

// ErrShed answers a call that was shed (Call.Shed, Call.Expires).
var ErrShed = errors.New("not sent: its attempt had ended, or it waited past the node timeout in this process")

// ErrSilent answers an acquisition (Call.Expires) that was not sent
// because its queue's worker has been waiting longer than the call's
// timeout on a node that answered nothing meanwhile. It matches ErrShed
// (the call never went out) and quorum.ErrTimeout (it is the timeout the
// call would have met, known early).
var ErrSilent error = silent{}

type silent struct{}

func (silent) Error() string {
	return "not sent: the node has answered nothing for longer than the node timeout"
}

func (silent) Is(target error) bool { return target == ErrShed || target == quorum.ErrTimeout }

// Replier receives a call's reply: the server's answer, or the error that
// kept it from one.
type Replier interface {
	Reply(cmd *redis.Cmd)
}

// ReplyFunc is a Replier made of a function.
type ReplyFunc func(cmd *redis.Cmd)

// Reply calls f.
func (f ReplyFunc) Reply(cmd *redis.Cmd) { f(cmd) }

// EvalSha builds the EVALSHA command line of a script call, once for all
// nodes of a round. For a script with a function of the guard's library
// (Script.Fn), the call's FCALL line (Script.AppendFCall) fills the same
// array beyond the returned line's length, for the nodes that have the
// library (see the worker's line): built once too, not once per node.
func EvalSha(s *scripts.Script, keys []string, args []any) []any {
	n := 3 + len(keys) + len(args)
	cmd := make([]any, 0, n+s.FCallLen(keys, args))
	cmd = append(cmd, "evalsha", s.SHA, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, args...)
	_ = s.AppendFCall(cmd[n:], cmd)
	return cmd
}

// evalSrc is the same call with the script's source, for a node that lost
// its script cache.
func evalSrc(c *Call) []any {
	cmd := make([]any, len(c.Cmd))
	copy(cmd, c.Cmd)
	cmd[0], cmd[1] = "eval", c.Script.Src
	return cmd
}

// Pipe is the connection layer of one Redis master: its queues and
// workers, its private clients, and what it learnt about the server.
type Pipe struct {
	// own is the pipe's private client, made from the caller's options
	// (see ClientOptions), whose connections the workers hold one each.
	own *redis.Client
	// sub is the private client of the node's release subscription.
	sub    *redis.Client
	queues [WorkersPerNode]queue
	wg     sync.WaitGroup

	// ident tells the node's server apart from the other nodes' (see
	// Servers); nil checks nothing.
	ident *Identity
	// route is where go-redis's log lines about the calls of the workers
	// go (see Route).
	route *Route
	// dialed are the connections the pipe's client opened last, for the
	// workers to find their sockets in (see conncheck.go).
	dialed dialed
	// dial is the workers' dialer of network and addr, the node; spares
	// hands what it dialled to own's pool (see dial.go).
	dial          dialFunc
	network, addr string
	spares        spares
	// cause is why the last connection attempt failed, for error text.
	cause lastCause
	// timeout is the node timeout; probeTLS whether a failed connection
	// may be checked for a TLS mismatch (see tlscheck.go): TCP, with the
	// lock's own dialer.
	timeout  time.Duration
	probeTLS bool
	// replica is whether the server said it is a replica when a
	// connection last opened, for error text.
	replica atomic.Bool
	// functions is whether new connections load the restart guard's
	// function library (see UseFunctions).
	functions atomic.Bool
	// setup bounds a new connection's dial and set-up: the caller's
	// DialTimeout, or the node timeout if that is longer (see send);
	// setups are those under way, which Close ends.
	setup  time.Duration
	setups setups
	// redirected, when set (a Cluster's or Sentinel's pipe), hears of each
	// reply that may mean the node's masters changed; set before any call.
	redirected func()
	// role is a Sentinel group's pipe's check of its server (retire.go).
	role masterRule
}

// UseFunctions makes every connection opened from now on load the restart
// guard's function library (scripts.Library) in its handshake, so that
// calls of scripts that have a function (their Fn) go out as FCALL. A
// Locker with the restart guard calls it before its first call; the pipes
// of other Lockers never send FUNCTION LOAD. Safe for concurrent use.
func (p *Pipe) UseFunctions() { p.functions.Store(true) }

// NewPipe starts the pipe of the node that c names, with clients of its
// own made from c's options (c itself sends nothing); timeout is the
// Locker's node timeout, route where go-redis's lines about its connections
// go, and ident (nil: none) tells its server apart from other nodes'. c's
// go-redis hooks see every command the pipe sends (see hooks.go).
func NewPipe(c *redis.Client, timeout time.Duration, route *Route, ident *Identity) *Pipe {
	// Clients of our own: their connections never mix with the caller's,
	// nothing we do changes the caller's client, and none of its settings
	// can make a script run twice or a wait outlast the node timeout.
	cmd, sub := ClientOptions(c.Options(), timeout)
	p := &Pipe{route: route, ident: ident, network: cmd.Network, addr: cmd.Addr, setup: max(c.Options().DialTimeout, timeout), timeout: timeout}
	p.probeTLS = cmd.Network == "tcp" && (c.Options().Dialer == nil || isDefaultDialer(c.Options().Dialer))
	p.setups.done = make(chan struct{})
	p.dial = p.dialed.note(routeDial(cmd.Dialer, route))
	cmd.Dialer, sub.Dialer = p.spares.dialer(p.dial), p.subDialer(routeDial(sub.Dialer, route))
	// The subscription's set-up (its HELLO) may take as long as its dial.
	sub.ReadTimeout = p.setup
	p.own, p.sub = redis.NewClient(cmd), redis.NewClient(sub)
	// Before any connection is made: each takes its client's hooks.
	hooks := newBridge(c)
	p.own.AddHook(hooks)
	p.sub.AddHook(hooks)
	p.wg.Add(WorkersPerNode)
	for i := range p.queues {
		q := &p.queues[i]
		q.ch = make(chan *Call, queueLen)
		q.w.p, q.w.ctx = p, deadlineCtx{route: route}
		go p.work(q)
	}
	return p
}

// EndSetUps ends the dials and set-ups of new connections under way, which
// may take the client's DialTimeout; from then on a set-up is bounded by
// its batch's node timeout. Close calls it; a caller that waits for queued
// calls to be answered before Close calls it first. Safe for concurrent use.
func (p *Pipe) EndSetUps() { p.setups.end() }

// Close stops the workers once the queues have drained. No call may be
// started after Close.
func (p *Pipe) Close() {
	p.EndSetUps()
	for i := range p.queues {
		close(p.queues[i].ch)
	}
	p.wg.Wait()
	// Their connections are ours alone; nothing to report.
	_ = p.own.Close()
	_ = p.sub.Close()
}

// Start queues c without blocking; c.Reply receives its outcome exactly
// once, from a worker (or at once when the queue is full). The call runs
// with its own timeout, whatever becomes of the caller.
//
// With inline set, the caller may send the call itself when its queue is
// idle (see trySend): Start then returns after the reply, at most the
// call's timeout later. Only a caller that would wait for this reply
// anyway may ask for that (a round over a single node).
func (p *Pipe) Start(c *Call, inline bool) {
	q := &p.queues[c.queue()]
	if c.Expires {
		c.queued = time.Now()
		if q.silent(c.queued, c.Timeout) {
			// The node has answered nothing for longer than this call's
			// whole timeout (it hangs, is paused or cut off): the call
			// would wait behind a batch that times out, and be shed. It
			// fails now, so that its round decides on the other nodes
			// without waiting for this one. A call now and then still
			// goes out, as a probe (see queue.silent).
			if c.Unsent != nil {
				c.Unsent.Store(true)
			}
			c.fail(ErrSilent)
			return
		}
	}
	if inline && q.trySend(c) {
		return
	}
	// Counted before it is queued: a caller that finds the count at zero
	// knows that no call made before its own is still waiting to be sent.
	q.unsent.Add(1)
	select {
	case q.ch <- c:
	default:
		q.unsent.Add(-1)
		c.fail(ErrOverloaded)
	}
}

// silent reports whether an acquisition of timeout made at now should not
// go out on q: its worker has waited longer than that on a node that
// answered nothing meanwhile, and no probe is due (one goes out a node
// timeout after the last batch ended, to learn whether the node is back).
func (q *queue) silent(now time.Time, timeout time.Duration) bool {
	since := q.w.silentSince.Load()
	ns := now.UnixNano()
	return since != 0 && ns-since > int64(timeout) && ns < q.w.probeAt.Load()
}

// fail answers c with err, a call that never went out.
func (c *Call) fail(err error) {
	cmd := redis.NewCmd(context.Background())
	cmd.SetErr(err)
	c.Reply.Reply(cmd)
}

// Client is the pipe's own client of the node, for calls outside the
// queues (a scan, say); its connections never carry the queues' calls.
func (p *Pipe) Client() *redis.Client { return p.own }

// Sub is the client of the node's release subscription.
func (p *Pipe) Sub() *redis.Client { return p.sub }

// SetUp is how long a new connection may take to come up: its dial and
// set-up, as a worker's.
func (p *Pipe) SetUp() time.Duration { return p.setup }

// Replica reports whether the server said it was a replica when a
// connection last opened.
func (p *Pipe) Replica() bool { return p.replica.Load() }

// Hold stops the worker of key's queue from sending, as a busy process
// would, until the returned func is called (for tests).
func (p *Pipe) Hold(key string) (letGo func()) {
	q := &p.queues[QueueOf(key)]
	q.mu.Lock()
	return q.mu.Unlock
}

// queue is the index of c's queue.
func (c *Call) queue() int {
	if c.Queue != "" {
		return QueueOf(c.Queue)
	}
	return QueueOf(c.Keys[0])
}

// QueueOf maps a key to one of a node's queues (FNV-1a); tests pick keys
// by it.
func QueueOf(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return int(h % WorkersPerNode)
}
