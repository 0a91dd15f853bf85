package redlock

import (
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// node is one Redis master. Its scripts go through the pipe's own clients,
// never through the caller's.
type node struct {
	addr string // for messages; credentials removed
	pipe conn.Link
	// note records each answer of the node's for its state (see Health);
	// made once per node, so that a call costs no closure for it.
	note func(err error)
}

// nodeCall is a scriptCall ready to go to the nodes of a round: a node
// operation, its command line built once for all nodes.
type nodeCall struct {
	timeout  time.Duration
	script   *scripts.Script
	keys     []string
	queue    string
	cmd      []any
	shedding *shedding
	// decode turns a node's integer reply into its vote.
	decode decodeFunc
}

func newNodeCall(timeout time.Duration, c scriptCall, decode decodeFunc) nodeCall {
	return nodeCall{timeout: timeout, script: c.script, keys: c.keys, queue: c.queue, cmd: conn.EvalSha(c.script, c.keys, c.args), shedding: c.shedding, decode: decode}
}

// voteOp is one node's share of a nodeCall: the pipe's call, and how its
// reply becomes the node's vote.
type voteOp struct {
	call   conn.Call
	n      *node
	node   int
	decode decodeFunc
	reply  func(int, quorum.Vote, int64, error)
}

var votePool = sync.Pool{New: func() any { return new(voteOp) }}

// send queues sc's call on node i; reply receives the node's vote once.
// inline lets the caller send it itself (see conn.Pipe.Start).
func (sc nodeCall) send(n *node, i int, reply func(int, quorum.Vote, int64, error), inline bool) {
	o := votePool.Get().(*voteOp)
	*o = voteOp{
		call:   conn.Call{Timeout: sc.timeout, Script: sc.script, Keys: sc.keys, Queue: sc.queue, Cmd: sc.cmd},
		n:      n,
		node:   i,
		decode: sc.decode,
		reply:  reply,
	}
	if sh := sc.shedding; sh != nil {
		o.call.Shed, o.call.Expires = sh.flag, sh.expires
		if sh.on != nil {
			o.call.Shed = &sh.on[i]
		}
		if sh.unsent != nil {
			o.call.Unsent = &sh.unsent[i]
		}
	}
	o.call.Reply = o
	n.pipe.Start(&o.call, inline)
}

// Reply decodes the node's reply into its vote, recycles o and hands the
// vote on.
func (o *voteOp) Reply(cmd *redis.Cmd) {
	r, err := cmd.Int64()
	v, val, err := o.decode(r, replyError(err))
	reply, node, n := o.reply, o.node, o.n
	*o = voteOp{}
	votePool.Put(o)
	if n.note != nil {
		n.note(err)
	}
	reply(node, v, val, err)
}

// sendRaw queues a call on n whose reply raw receives as it is (for
// scripts whose reply is not an integer).
func (n *node) sendRaw(timeout time.Duration, s *scripts.Script, keys []string, cmd []any, raw func(*redis.Cmd)) {
	n.pipe.Start(&conn.Call{Timeout: timeout, Script: s, Keys: keys, Cmd: cmd, Reply: conn.ReplyFunc(raw)}, false)
}
