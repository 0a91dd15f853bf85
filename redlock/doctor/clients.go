package doctor

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// nodeConn is the checker's own client for one node, made from the
// caller's client's options as a Locker makes its own: the caller's client
// is never used, so none of its settings (retries, timeouts, hooks, a
// client-side cache) changes what is measured, and nothing is left in its
// pool.
type nodeConn struct {
	opts        *redis.Options
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	dialTimeout time.Duration
	client      *redis.Client // nil until connect succeeds

	mu    sync.Mutex
	first net.Conn // connect's connection, until the client takes it
}

func newNodeConn(caller *redis.Options, nodeTimeout time.Duration) *nodeConn {
	// A Locker's settings: a command is never sent twice, every wait
	// follows the call's deadline alone, nothing of the caller's
	// client-side state is used, and the dial is bounded by the context.
	o, _ := conn.ClientOptions(caller, nodeTimeout)
	// The checks run one after the other on each node.
	o.PoolSize, o.MinIdleConns, o.MaxIdleConns = 2, 0, 1
	return &nodeConn{opts: o, dial: o.Dialer, dialTimeout: nodeTimeout}
}

// connect dials the node itself, within the node timeout, and makes the
// client that then uses this connection first. go-redis writes every
// failed dial of a client to its process-wide logger; dialling an
// unreachable node here keeps such lines off the program's stderr (a
// Locker marks its own for redlock.RedisLogger instead).
func (n *nodeConn) connect(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, n.dialTimeout)
	defer cancel()
	first, err := n.dial(dctx, n.opts.Network, n.opts.Addr)
	if err != nil {
		return err
	}
	n.first = first
	o := *n.opts
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if c := n.takeFirst(); c != nil {
			return c, nil
		}
		return n.dial(ctx, network, addr)
	}
	n.client = redis.NewClient(&o)
	return nil
}

// takeFirst returns connect's connection once, then nil.
func (n *nodeConn) takeFirst() net.Conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.first
	n.first = nil
	return c
}

// close closes the client and its connections, which are the checker's
// alone: nothing to report.
func (n *nodeConn) close() {
	if c := n.takeFirst(); c != nil {
		_ = c.Close()
	}
	if n.client != nil {
		_ = n.client.Close()
	}
}
