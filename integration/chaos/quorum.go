package chaos

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/redlock"
)

// Quorum is the nodes a run locks on, each one vote: standalone masters
// behind fault proxies (*cluster.Cluster), Redis Clusters
// (*cluster.RedisClusters) or Sentinel groups (*cluster.SentinelGroups). Start makes one of the kind a scenario asks
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

// ClusterNodes is the number of Redis Clusters, or Sentinel groups, of a
// quorum of them: three, so that one at a time can fail.
const ClusterNodes = 3

// Start starts the quorum that opts describe: Nodes standalone masters on
// backend, or ClusterNodes Redis Clusters or Sentinel groups of
// processes.
func Start(ctx context.Context, backend cluster.Backend, opts cluster.Options) (Quorum, error) {
	if !opts.RedisCluster && !opts.Sentinel {
		c, err := cluster.Start(ctx, backend, Nodes, opts)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	if _, ok := backend.(cluster.Processes); !ok {
		return nil, fmt.Errorf("%v nodes run as processes, not on the %s backend", opts, backend.Name())
	}
	if opts.Sentinel {
		sg, err := cluster.StartSentinelGroups(ctx, ClusterNodes, opts)
		if err != nil {
			return nil, err
		}
		return sg, nil
	}
	rc, err := cluster.StartRedisClusters(ctx, ClusterNodes, opts)
	if err != nil {
		return nil, err
	}
	return rc, nil
}

// openNode returns the quorum node at addr (an address of Quorum.Addrs)
// and how to close its client: a Redis Cluster for a cluster's address
// (cluster.ClusterSeeds), a Sentinel group for a group's
// (cluster.SentinelNode), a standalone master otherwise.
func openNode(addr string) (redlock.Node, func() error) {
	if name, sentinels, ok := cluster.SentinelNode(addr); ok {
		// The Locker opens its own connections from the options, and
		// closes them with itself: there is no client to close.
		return redlock.Sentinel(cluster.NewFailoverOptions(name, sentinels)), func() error { return nil }
	}
	if seeds, ok := cluster.ClusterSeeds(addr); ok {
		c := cluster.NewClusterClient(seeds)
		return redlock.Cluster(c), c.Close
	}
	c := cluster.NewClient(addr)
	return redlock.Server(c), c.Close
}
