package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
)

// node is one Redis master. Only the scripting commands are used, so a test
// can wrap a real client to inject faults.
type node struct {
	client redis.Scripter
	addr   string // for messages; credentials removed
	pipe   *pipe
}

// Multiplexing: every script call bound for a node goes through that node's
// pipe, a few queues each served by one long-lived worker. A worker takes
// whatever has queued up, up to maxBatch calls, and sends it as one pipeline:
// one write and one read for all of them, instead of a round trip per call on
// a connection of its own. A key always maps to the same queue, so the calls
// for one key reach the node in the order they were made (a release never
// overtakes the acquisition it undoes); different keys proceed in parallel. Uncontended, a call goes out alone at once; under
// load, concurrent lock operations share round trips, and a round starts no
// goroutine per node (whose stacks would have to grow through the client's
// deep call path every time).
const (
	workersPerNode = 4
	maxBatch       = 64
	queueLen       = 1024
)

// errOverloaded is a node's answer when its queue is full: it is far behind
// (or hangs), and waiting in line would only exceed the node timeout.
var errOverloaded = errors.New("redlock: node overloaded: too many calls queued")

// nodeCall is one script call waiting in a node's queue.
type nodeCall struct {
	timeout time.Duration
	script  *redis.Script
	keys    []string
	args    []any
	node    int
	decode  func(r int64, err error) (quorum.Vote, int64, error)
	reply   func(node int, v quorum.Vote, value int64, err error)
	// raw, if set instead of decode and reply, receives the reply as it is
	// (for scripts whose reply is not an integer).
	raw func(cmd *redis.Cmd)
}

var callPool = sync.Pool{New: func() any { return new(nodeCall) }}

type pipe struct {
	client   redis.Scripter
	pipeline func() redis.Pipeliner // nil: the client cannot pipeline
	queues   [workersPerNode]chan *nodeCall
	wg       sync.WaitGroup
}

func newPipe(c redis.UniversalClient) *pipe {
	p := &pipe{client: c}
	// Pipelines bypass a wrapper's EvalSha; a wrapper that injects faults
	// by overriding EvalSha only (see the tests) is served call by call.
	if _, plain := c.(*redis.Client); plain {
		p.pipeline = c.Pipeline
	}
	p.wg.Add(workersPerNode)
	for i := range p.queues {
		p.queues[i] = make(chan *nodeCall, queueLen)
		go p.work(p.queues[i])
	}
	return p
}

// close stops the workers once the queue has drained. No call may be
// started after close.
func (p *pipe) close() {
	for _, q := range p.queues {
		close(q)
	}
	p.wg.Wait()
}

// start queues a call without blocking; reply receives its outcome exactly
// once, from a worker (or at once when the queue is full). The call runs
// with its own timeout, whatever becomes of the caller's context.
func (p *pipe) start(timeout time.Duration, node int, s *redis.Script, keys []string, args []any,
	decode func(int64, error) (quorum.Vote, int64, error), reply func(int, quorum.Vote, int64, error)) {
	c := callPool.Get().(*nodeCall)
	*c = nodeCall{timeout: timeout, script: s, keys: keys, args: args, node: node, decode: decode, reply: reply}
	select {
	case p.queues[queueOf(keys[0])] <- c:
	default:
		p.finish(c, 0, errOverloaded)
	}
}

// startRaw queues a call whose reply is handed over as it is.
func (p *pipe) startRaw(timeout time.Duration, s *redis.Script, keys []string, args []any, raw func(*redis.Cmd)) {
	c := callPool.Get().(*nodeCall)
	*c = nodeCall{timeout: timeout, script: s, keys: keys, args: args, raw: raw}
	select {
	case p.queues[queueOf(keys[0])] <- c:
	default:
		cmd := redis.NewCmd(context.Background())
		cmd.SetErr(errOverloaded)
		p.finishCmd(c, cmd)
	}
}

func (p *pipe) finish(c *nodeCall, r int64, err error) {
	v, val, err := c.decode(r, err)
	reply, node := c.reply, c.node
	*c = nodeCall{}
	callPool.Put(c)
	reply(node, v, val, err)
}

// finishCmd delivers a reply to the call's raw or integer receiver.
func (p *pipe) finishCmd(c *nodeCall, cmd *redis.Cmd) {
	if raw := c.raw; raw != nil {
		*c = nodeCall{}
		callPool.Put(c)
		raw(cmd)
		return
	}
	r, err := cmd.Int64()
	p.finish(c, r, err)
}

// queueOf maps a key to one of a node's queues (FNV-1a).
func queueOf(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return int(h % workersPerNode)
}

func (p *pipe) work(queue chan *nodeCall) {
	defer p.wg.Done()
	batch := make([]*nodeCall, 0, maxBatch)
	for c := range queue {
		batch = append(batch[:0], c)
	fill:
		for len(batch) < maxBatch {
			select {
			case c, ok := <-queue:
				if !ok {
					break fill
				}
				batch = append(batch, c)
			default:
				break fill
			}
		}
		p.exec(batch)
	}
}

// exec sends a batch and delivers every reply. Every queued call is sent,
// even when its caller has given up: a round is decided at a majority, and
// the rest of its calls (the release of a key on the last nodes, say) must
// still reach their nodes; a late acquisition is undone by its round's Late.
func (p *pipe) exec(live []*nodeCall) {
	var timeout time.Duration
	for _, c := range live {
		timeout = max(timeout, c.timeout)
	}
	// The batch has its own deadline, the longest node timeout in it: the
	// rounds decide on their own timers, and one caller's cancellation must
	// not fail the others' calls.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if len(live) == 1 || p.pipeline == nil {
		for _, c := range live {
			p.finishCmd(c, c.script.Run(ctx, p.client, c.keys, c.args...))
		}
		return
	}
	pl := p.pipeline()
	cmds := make([]*redis.Cmd, len(live))
	for i, c := range live {
		cmds[i] = c.script.EvalSha(ctx, pl, c.keys, c.args...)
	}
	// Per-command errors are read below; Exec's error is the first of them.
	_, _ = pl.Exec(ctx)
	// A node that lost its script cache (a restart) answers NOSCRIPT: send
	// those again with the script's source, which also caches it.
	var retry []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		pl = p.pipeline()
		for _, i := range retry {
			cmds[i] = live[i].script.Eval(ctx, pl, live[i].keys, live[i].args...)
		}
		_, _ = pl.Exec(ctx)
	}
	for i, c := range live {
		p.finishCmd(c, cmds[i])
	}
}
