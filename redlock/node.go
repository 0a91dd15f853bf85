package redlock

import (
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/nodeinfo"
)

// Node is one vote of a Locker's quorum: an independent Redis deployment
// that keeps the locks' state. Server makes one of a standalone master,
// Cluster one of a Redis Cluster, Sentinel one of a Sentinel group;
// NewNodes takes them, of any kinds mixed.
// The Locker never sends a script through the client a Node was made of:
// it opens connections of its own from the client's options.
type Node interface {
	// spec is what NewNodes needs of the i-th node given: its description
	// (address for messages, identity, kind) and how to open its link;
	// or why it cannot be a node.
	spec(i int) (nodeinfo.Node, opener, error)
}

// opener opens a node's link for its Locker.
type opener func(env linkEnv) conn.Link

// linkEnv is what every node's link gets from its Locker.
type linkEnv struct {
	cfg   *config
	ident *conn.Identity
}

// serverNode is a standalone master (Server).
type serverNode struct{ c *redis.Client }

// Server is the standalone Redis master that c reaches, as a Node. A nil c
// is an ErrInvalid of NewNodes, and so is a Sentinel failover client
// (redis.NewFailoverClient): a master that Sentinel demotes stays writable
// for seconds, and connections opened to it keep voting there, so it is
// no safe node; give its options to Sentinel instead.
func Server(c *redis.Client) Node { return serverNode{c} }

func (n serverNode) spec(i int) (nodeinfo.Node, opener, error) {
	d, err := nodeinfo.Server(n.c, i)
	return d, func(env linkEnv) conn.Link {
		return conn.NewPipe(n.c, env.cfg.nodeTimeout, env.cfg.route(), env.ident)
	}, err
}

// clusterNode is a Redis Cluster (Cluster).
type clusterNode struct{ c *redis.ClusterClient }

// Cluster is the Redis Cluster that c reaches, as one Node: each lock's
// vote is cast by the master that owns the lock key's slot, and a
// redirect (the slot moved, or is moving) is a failed vote, never
// followed. The library's own keys of a lock (its fencing counter, the
// restart guard's marker, a semaphore's slots, ...) then carry the hash
// tag of the lock key's slot, on every node of the Locker: a Locker with a
// cluster node names them as a cluster does (docs/deployment.md). A nil c,
// or one with no Addrs (even with ClusterSlots), is an ErrInvalid of
// NewNodes.
// The client's options are used (credentials, TLS, dialer, timeouts); its
// hooks are not (docs/deployment.md#clusters).
func Cluster(c *redis.ClusterClient) Node { return clusterNode{c} }

func (n clusterNode) spec(i int) (nodeinfo.Node, opener, error) {
	d, err := nodeinfo.Cluster(n.c, i)
	return d, func(env linkEnv) conn.Link {
		return conn.NewCluster(n.c.Options(), env.cfg.nodeTimeout, env.cfg.route(), env.ident)
	}, err
}

// sentinelNode is a Sentinel group (Sentinel).
type sentinelNode struct{ o *redis.FailoverOptions }

// Sentinel is the Sentinel group that o names (MasterName, SentinelAddrs)
// as one Node: each vote is cast by the master the group's sentinels name,
// asked on connections of the Locker's own. When they name another, new
// calls go to the new master and the Locker's connections to the old one
// end: calls not yet sent there fail instead. A server that says it is
// not a master votes no. A failover is a memory loss the restart guard
// catches (docs/deployment.md#sentinel-groups says what to configure). A
// nil o, an empty MasterName, no SentinelAddrs, an empty address or
// ReplicaOnly is an ErrInvalid of NewNodes, and so is a group given twice.
// o's credentials, database, TLS, dialer and timeouts are used; its read
// routing (RouteByLatency, RouteRandomly) does not apply to votes.
func Sentinel(o *redis.FailoverOptions) Node { return sentinelNode{o} }

func (n sentinelNode) spec(i int) (nodeinfo.Node, opener, error) {
	d, err := nodeinfo.Sentinel(n.o, i)
	return d, func(env linkEnv) conn.Link {
		return conn.NewSentinel(n.o, env.cfg.nodeTimeout, env.cfg.route(), env.ident)
	}, err
}
