package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// ClusterNodes is the quorum size of the node-kind comparison: three
// standalone servers, or three Redis Clusters.
const ClusterNodes = 3

// clusterStart bounds the start of the comparison's clusters, all at
// once, on a machine that may be busy (one of 3 masters takes about 2 s).
const clusterStart = 2 * time.Minute

// nodeKind is one quorum of the node-kind comparison: plain redlock over
// ClusterNodes standalone servers (shards 0), or over ClusterNodes Redis
// Clusters of shards masters each, with a client per server for reading
// its counters.
type nodeKind struct {
	shards int
	impl   lockers.Impl
	// servers reach every server of the quorum, shard by shard.
	servers []redis.UniversalClient
	// closers are the cluster clients and the servers' clients made here
	// (the standalone kind's are the harness Cluster's), then the
	// clusters, closed in this order.
	closers []io.Closer
}

// name is how progress lines name the kind.
func (k *nodeKind) name() string {
	if k.shards == 0 {
		return fmt.Sprintf("redlock over %d servers", ClusterNodes)
	}
	return fmt.Sprintf("redlock over %d clusters of %d shards", ClusterNodes, k.shards)
}

func (k *nodeKind) close() error {
	var errs []error
	if k.impl != nil {
		errs = append(errs, k.impl.Close())
	}
	for _, c := range k.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// startKinds sets up the standalone kind over the first ClusterNodes
// servers of cl, and a cluster kind per shard count, starting every
// cluster at once. On failure it leaves nothing of its own running.
func startKinds(ctx context.Context, cl *Cluster, shards []int, progress io.Writer) (kinds []*nodeKind, err error) {
	defer func() {
		if err != nil {
			for _, k := range kinds {
				err = errors.Join(err, k.close())
			}
			kinds = nil
		}
	}()
	servers := &nodeKind{servers: cl.Direct[:ClusterNodes]}
	kinds = append(kinds, servers)
	nodes := make([]redlock.Node, ClusterNodes)
	for i, c := range servers.servers {
		p, ok := c.(*redis.Client)
		if !ok {
			return kinds, fmt.Errorf("node %d: a %T, not a *redis.Client", i+1, c)
		}
		nodes[i] = redlock.Server(p)
	}
	if servers.impl, err = lockers.OverNodes(nodes); err != nil {
		return kinds, err
	}
	total := 0
	for _, s := range shards {
		total += ClusterNodes * s
	}
	fmt.Fprintf(progress, "starting %d Redis Clusters (%d redis-server processes)\n", ClusterNodes*len(shards), total)
	ctx, cancel := context.WithTimeout(ctx, clusterStart)
	defer cancel()
	started := make([]*nodeKind, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		wg.Go(func() { started[i], errs[i] = startClusterKind(ctx, s) })
	}
	wg.Wait()
	for _, k := range started {
		if k != nil {
			kinds = append(kinds, k) // closed by the defer on failure
		}
	}
	return kinds, errors.Join(errs...)
}

// startClusterKind starts ClusterNodes clusters of shards masters, no
// replicas, and sets up plain redlock over them. On failure it returns
// nothing and leaves nothing running.
func startClusterKind(ctx context.Context, shards int) (k *nodeKind, err error) {
	k = &nodeKind{shards: shards}
	defer func() {
		if err != nil {
			err = errors.Join(err, k.close())
			k = nil
		}
	}()
	var clusters []io.Closer
	defer func() { k.closers = append(k.closers, clusters...) }()
	nodes := make([]redlock.Node, ClusterNodes)
	for i := range nodes {
		c, err := redistest.StartCluster(ctx, redistest.ClusterOptions{Masters: shards})
		if err != nil {
			return k, fmt.Errorf("cluster %d of %d shards: %w", i+1, shards, err)
		}
		clusters = append(clusters, c)
		cc := c.NewClusterClient()
		k.closers = append(k.closers, cc)
		nodes[i] = redlock.Cluster(cc)
		// Every node of a cluster without replicas is a master.
		for _, n := range c.Nodes {
			sc := n.NewClient()
			k.closers = append(k.closers, sc)
			k.servers = append(k.servers, sc)
		}
	}
	k.impl, err = lockers.OverNodes(nodes)
	return k, err
}
