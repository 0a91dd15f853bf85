package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// RedisClusters is a quorum whose nodes are Redis Clusters
// (Options.RedisCluster): each node is a cluster of three masters with a
// replica each, of redis-server processes on loopback (internal/redistest),
// without persistence. There are no proxies: a cluster client learns its
// masters' own addresses from the cluster, so every fault acts on the
// servers and on the slots (redisfaults.go).
type RedisClusters struct {
	// Clusters are the quorum's nodes, in a fixed order.
	Clusters []*redistest.Cluster

	opts Options
}

// clusterPrefix starts the address of a Redis Cluster node of the quorum
// (RedisClusters.Addrs): the prefix, then the cluster's seed addresses,
// comma-separated.
const clusterPrefix = "redis-cluster:"

// ClusterSeeds returns the seed addresses of a Redis Cluster node's
// address (RedisClusters.Addrs), and false for any other address.
func ClusterSeeds(addr string) ([]string, bool) {
	rest, ok := strings.CutPrefix(addr, clusterPrefix)
	if !ok {
		return nil, false
	}
	return strings.Split(rest, ","), true
}

// NewClusterClient returns a go-redis cluster client of seeds set up as
// NewClient's: context deadlines honoured, no retries, a small pool. The
// library reads its options and opens connections of its own.
func NewClusterClient(seeds []string) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 seeds,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		PoolSize:              4,
		Protocol:              2,
		DisableIdentity:       true,
	})
}

// StartRedisClusters starts n Redis Clusters at once. opts must ask for
// RedisCluster and nothing else: persistence, maxmemory and the clock shim
// are the standalone nodes' options. On failure it stops what it started.
func StartRedisClusters(ctx context.Context, n int, opts Options) (*RedisClusters, error) {
	if want := (Options{RedisCluster: true}); opts != want {
		return nil, fmt.Errorf("redis clusters: options %v, want %v", opts, want)
	}
	rc := &RedisClusters{Clusters: make([]*redistest.Cluster, n), opts: opts}
	err := inParallel(n, func(i int) (err error) {
		rc.Clusters[i], err = redistest.StartCluster(ctx, redistest.ClusterOptions{Masters: 3, Replicas: 1})
		return err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting %d redis clusters: %w", n, err), rc.Close(ctx))
	}
	return rc, nil
}

// Options returns the options the clusters were started with.
func (rc *RedisClusters) Options() Options { return rc.opts }

// Addrs returns each cluster's address as a quorum node (ClusterSeeds):
// every one of its servers is a seed.
func (rc *RedisClusters) Addrs() []string {
	out := make([]string, len(rc.Clusters))
	for i, c := range rc.Clusters {
		out[i] = clusterPrefix + strings.Join(c.Addrs(), ",")
	}
	return out
}

// ServerAddrs is Addrs: clients reach a cluster's servers directly.
func (rc *RedisClusters) ServerAddrs() []string { return rc.Addrs() }

// Heal undoes what a fault left behind: it continues every paused server,
// starts every killed one, and waits until each cluster is ready (every
// node says cluster_state:ok and they agree on slots and roles). Who is
// master after a failover stays as it is.
func (rc *RedisClusters) Heal(ctx context.Context) error {
	return inParallel(len(rc.Clusters), func(i int) error { return healCluster(ctx, rc.Clusters[i]) })
}

// healCluster is Heal of one cluster.
func healCluster(ctx context.Context, c *redistest.Cluster) error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, wake(n.Server))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return c.AwaitReady(ctx)
}

// Reset heals every cluster and empties every master, waiting until its
// replica has emptied too, so the clusters can serve another run.
func (rc *RedisClusters) Reset(ctx context.Context) error {
	if err := rc.Heal(ctx); err != nil {
		return err
	}
	var errs []error
	for _, c := range rc.Clusters {
		tp, err := c.Topology(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range tp.Masters() {
			errs = append(errs, flushMaster(ctx, m.Server, len(tp.Replicas(m))))
		}
	}
	return errors.Join(errs...)
}

// flushMaster empties master and waits (WAIT) until its replicas have
// the flush too: a replica promoted later must not bring back keys of an
// earlier run.
func flushMaster(ctx context.Context, master *redistest.Server, replicas int) error {
	cl := master.NewClient()
	defer cl.Close()
	if err := cl.Do(ctx, "FLUSHALL", "SYNC").Err(); err != nil {
		return fmt.Errorf("FLUSHALL on %s: %w", master.Addr, err)
	}
	n, err := cl.Wait(ctx, replicas, 2*time.Second).Result()
	if err != nil || int(n) < replicas {
		return fmt.Errorf("WAIT on %s: %d of %d replicas (%v)", master.Addr, n, replicas, err)
	}
	return nil
}

// Close stops every cluster.
func (rc *RedisClusters) Close(context.Context) error { return closeEach(rc.Clusters) }

// keyShard returns the master of key's slot in cluster i, with the slot.
func (rc *RedisClusters) keyShard(ctx context.Context, i int, key string) (*redistest.ClusterNode, int, error) {
	c := rc.Clusters[i]
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		return nil, 0, err
	}
	owner, err := c.SlotOwner(ctx, slot)
	return owner, slot, err
}

// otherMaster returns a master of tp other than m: the next one after m
// in the order of their slots.
func otherMaster(tp *redistest.Topology, m *redistest.ClusterNode) (*redistest.ClusterNode, error) {
	ms := tp.Masters()
	i := slices.Index(ms, m)
	if i < 0 || len(ms) < 2 {
		return nil, fmt.Errorf("no master besides %s", m.Addr)
	}
	return ms[(i+1)%len(ms)], nil
}
