package chaos

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/redlock"
)

// Quorum is the nodes a run locks on, each one vote: standalone masters
// behind fault proxies (*cluster.Cluster) or Redis Clusters
// (*cluster.RedisClusters). Start makes one of the kind a scenario asks
// for, and openNode makes a client's Node of each address.
type Quorum interface {
	// Options says what kind of nodes they are.
	Options() cluster.Options
	// Addrs are the nodes' addresses as clients reach them, one per node,
	// which openNode understands; ServerAddrs the same past any proxy.
	Addrs() []string
	ServerAddrs() []string
	// Reset heals every node and empties it, for the next run; Heal only
	// undoes the faults.
	Reset(ctx context.Context) error
	Heal(ctx context.Context) error
	// Close removes the nodes for good.
	Close(ctx context.Context) error
}

// ClusterNodes is the number of Redis Clusters of a quorum of clusters:
// three, so that one at a time can fail.
const ClusterNodes = 3

// Start starts the quorum that opts describe: Nodes standalone masters on
// backend, or ClusterNodes Redis Clusters of processes.
//
// A Sentinel backend would be one more case here (a cluster.Options field,
// its starter), beside its address form in openNode and its faults.
func Start(ctx context.Context, backend cluster.Backend, opts cluster.Options) (Quorum, error) {
	if !opts.RedisCluster {
		c, err := cluster.Start(ctx, backend, Nodes, opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	if _, ok := backend.(cluster.Processes); !ok {
		return nil, fmt.Errorf("redis cluster nodes run as processes, not on the %s backend", backend.Name())
	}
	rc, err := cluster.StartRedisClusters(ctx, ClusterNodes, opts)
	if err != nil {
		return nil, err
	}
	return rc, nil
}

// openNode returns the quorum node at addr (an address of Quorum.Addrs)
// and how to close its client: a Redis Cluster for a cluster's address
// (cluster.ClusterSeeds), a standalone master otherwise.
func openNode(addr string) (redlock.Node, func() error) {
	if seeds, ok := cluster.ClusterSeeds(addr); ok {
		c := cluster.NewClusterClient(seeds)
		return redlock.Cluster(c), c.Close
	}
	c := cluster.NewClient(addr)
	return redlock.Server(c), c.Close
}
