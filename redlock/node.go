package redlock

import (
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// Node is one vote of a Locker's quorum: an independent Redis deployment
// that keeps the locks' state. Server makes one of a standalone master,
// Cluster one of a Redis Cluster, Sentinel one of a Sentinel group;
// NewNodes takes them, of any kinds mixed.
// The Locker never sends a script through the client a Node was made of:
// it opens connections of its own from the client's options.
type Node interface {
	// spec is how the Locker reaches the node, or why it cannot (it is
	// the i-th node given).
	spec(i int) (nodeSpec, error)
}

// nodeSpec is what NewNodes needs of a node: its address for messages,
// keys that are equal for two nodes that name one server (ids), whether
// its keys must follow a cluster's slots, and how to open its link.
type nodeSpec struct {
	addr      string
	ids       []string
	clustered bool
	open      func(env linkEnv) conn.Link
}

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

func (n serverNode) spec(i int) (nodeSpec, error) {
	switch {
	case n.c == nil:
		return nodeSpec{}, invalid("node %d is a Server of a nil client", i)
	case conn.IsFailoverClient(n.c.Options()):
		// Its connections keep voting on a demoted master after a
		// failover, for as long as they stay open: two holders.
		return nodeSpec{}, invalid("node %d is a Sentinel failover client: a master that Sentinel demotes keeps its votes on open connections; give its FailoverOptions to redlock.Sentinel instead", i)
	}
	id, addr := identify(n.c, i)
	return nodeSpec{addr: addr, ids: []string{id}, open: func(env linkEnv) conn.Link {
		return conn.NewPipe(n.c, env.cfg.nodeTimeout, env.cfg.route(), env.ident)
	}}, nil
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
// or one with no Addrs nor ClusterSlots, is an ErrInvalid of NewNodes.
// The client's options are used (credentials, TLS, dialer, timeouts); its
// hooks are not (docs/deployment.md#clusters).
func Cluster(c *redis.ClusterClient) Node { return clusterNode{c} }

func (n clusterNode) spec(i int) (nodeSpec, error) {
	if n.c == nil {
		return nodeSpec{}, invalid("node %d is a Cluster of a nil client", i)
	}
	o := n.c.Options()
	if len(o.Addrs) == 0 {
		return nodeSpec{}, invalid("node %d is a Cluster with no addresses (ClusterOptions.Addrs)", i)
	}
	ids, addrs := make([]string, len(o.Addrs)), make([]string, len(o.Addrs))
	for j, a := range o.Addrs {
		addr, key, ok := conn.NodeAddr(conn.MasterOptions(o, a))
		if !ok {
			return nodeSpec{}, invalid("node %d is a Cluster with an empty address", i)
		}
		ids[j], addrs[j] = "addr "+key, addr
	}
	return nodeSpec{addr: "cluster " + strings.Join(addrs, ","), ids: ids, clustered: true, open: func(env linkEnv) conn.Link {
		return conn.NewCluster(o, env.cfg.nodeTimeout, env.cfg.route(), env.ident)
	}}, nil
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

func (n sentinelNode) spec(i int) (nodeSpec, error) {
	o := n.o
	switch {
	case o == nil:
		return nodeSpec{}, invalid("node %d is a Sentinel of nil options", i)
	case o.MasterName == "":
		return nodeSpec{}, invalid("node %d is a Sentinel with no MasterName", i)
	case len(o.SentinelAddrs) == 0:
		return nodeSpec{}, invalid("node %d is a Sentinel with no SentinelAddrs", i)
	case o.ReplicaOnly:
		return nodeSpec{}, invalid("node %d is a Sentinel with ReplicaOnly: a replica cannot vote", i)
	}
	// One id per sentinel and group name: two nodes that share a sentinel
	// watching one group are one group given twice. (A group reached
	// through disjoint sentinels is caught by the servers' identity.)
	ids := make([]string, len(o.SentinelAddrs))
	for j, a := range o.SentinelAddrs {
		_, key, ok := conn.NodeAddr(conn.SentinelOptions(o, a))
		if !ok {
			return nodeSpec{}, invalid("node %d is a Sentinel with an empty address in SentinelAddrs", i)
		}
		ids[j] = "sentinel " + o.MasterName + " " + key
	}
	return nodeSpec{addr: "sentinel " + o.MasterName, ids: ids, open: func(env linkEnv) conn.Link {
		return conn.NewSentinel(o, env.cfg.nodeTimeout, env.cfg.route(), env.ident)
	}}, nil
}
