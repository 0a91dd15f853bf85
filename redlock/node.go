package redlock

import (
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// Node is one vote of a Locker's quorum: an independent Redis deployment
// that keeps the locks' state. Server makes one of a standalone master;
// NewNodes takes them. The Locker never sends through the client a Node
// was made of: it opens connections of its own from the client's options.
type Node interface {
	// server is the node's client, or why it cannot be one (it is the
	// i-th node given).
	server(i int) (*redis.Client, error)
}

// serverNode is a standalone master (Server).
type serverNode struct{ c *redis.Client }

// Server is the standalone Redis master that c reaches, as a Node. A nil c
// is an ErrInvalid of NewNodes, and so is a Sentinel failover client
// (redis.NewFailoverClient): a master that Sentinel demotes stays writable
// for seconds, and connections opened to it keep voting there, so it is
// no safe node.
func Server(c *redis.Client) Node { return serverNode{c} }

func (n serverNode) server(i int) (*redis.Client, error) {
	switch {
	case n.c == nil:
		return nil, invalid("node %d is a Server of a nil client", i)
	case conn.IsFailoverClient(n.c.Options()):
		// Its connections keep voting on a demoted master after a
		// failover, for as long as they stay open: two holders.
		return nil, invalid("node %d is a Sentinel failover client: a master that Sentinel demotes keeps its votes on open connections, so it is not a safe node", i)
	}
	return n.c, nil
}
