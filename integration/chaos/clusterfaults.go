package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/internal/redistest"
)

// redisCluster is the kind of quorum of the cluster scenarios: three Redis
// Clusters of three masters with a replica each.
var redisCluster = cluster.Options{RedisCluster: true}

// ClusterScenarios are the runs on Redis Cluster nodes (Quorum of
// cluster.RedisClusters), in order. Their faults are the cluster faults of
// the catalogue (Faults), each on the shard that owns the slot of one of
// the run's keys in one cluster (a majority of them with Majority).
var ClusterScenarios = []Scenario{
	// Slots move, at once or key by key with clients racing the move,
	// and a shard fails over without losing a write: no node forgets,
	// so exclusion and fences hold without the restart guard.
	{Name: "cluster-reshard-failover", Cluster: redisCluster, Asserted: true,
		Faults: []string{"reshard", "migrate-in-flight", "cluster-failover"}},
	// Shards forget: a lagging replica takes over from a dead master, a
	// master restarts empty. The restart guard keeps such a shard out of
	// every vote for the maximum TTL; the fencing counters are lost with
	// the rest (fences still grow under the guard).
	{Name: "cluster-memory-loss-guarded", Cluster: redisCluster, Guard: true, Asserted: true, CountersLost: true, CalmTTLs: 1,
		Faults: []string{"cluster-failover-lost-writes", "shard-kill", "shard-restart"}},
	// Every cluster fault at random, guarded, with client pauses.
	{Name: "cluster-mixed-guarded", Cluster: redisCluster, Guard: true, Asserted: true, CountersLost: true, CalmTTLs: 1, Sample: true,
		Faults: []string{"reshard", "migrate-in-flight", "cluster-failover", "cluster-failover-lost-writes", "shard-kill", "shard-restart", "client-pause"}},
	// The same memory loss without the guard, on two clusters of three
	// at once, with 4s locks and more long holds, as the unguarded
	// restarts of standalone nodes: outside the claims, not asserted; a
	// long run should show violations.
	{Name: "cluster-memory-loss-unguarded", Cluster: redisCluster, CountersLost: true, Majority: true, CalmTTLs: 1, LongHolds: 0.05, TTL: 4 * time.Second,
		Faults: []string{"cluster-failover-lost-writes", "shard-restart"}},
}

// clusterFault is where a fault of Redis Cluster nodes acts: cluster node
// of rc, on the shard of key's slot. rng is the fault's own draw; run is
// the run's context, which cuts a fault's waits short.
type clusterFault struct {
	rc   *cluster.RedisClusters
	node int
	key  string
	rng  *rand.Rand
	run  context.Context
}

// wait returns a wait of d, cut short when the run ends.
func (cf clusterFault) wait(d time.Duration) func() {
	return func() { sleep(cf.run, d) }
}

// onClusters injects a fault of Redis Cluster nodes on a minority of the
// clusters (a majority with Scenario.Majority), on all of them at once.
func (n *nemesis) onClusters(ctx context.Context, f Fault, d time.Duration) error {
	rc, ok := n.quorum.(*cluster.RedisClusters)
	if !ok {
		return fmt.Errorf("a fault of Redis Cluster nodes on %v nodes", n.quorum.Options())
	}
	return n.onGroups(ctx, f, "cluster", true, func(hctx context.Context, i int, key string, rng *rand.Rand) (string, error) {
		return f.OnCluster(hctx, clusterFault{rc: rc, node: i, key: key, rng: rng, run: ctx}, d)
	})
}

// onGroups injects a fault of nodes that are groups of servers (Redis
// Clusters, Sentinel groups) on a minority of them (a majority with
// Scenario.Majority), on all of them at once: act injects and heals it
// on node i, where key is one of the run's keys, the same for every
// target, and rng the target's own draw; it says what it did. kind names
// a node in the log, which names the key if keyed (a fault of the key's
// shard).
func (n *nemesis) onGroups(ctx context.Context, f Fault, kind string, keyed bool, act func(hctx context.Context, i int, key string, rng *rand.Rand) (string, error)) error {
	t := Minority
	if n.majority {
		t = Majority
	}
	targets := n.targets(t)
	// Faults are healed even when the run is being cancelled.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	whats, errs := make([]string, len(targets)), make([]error, len(targets))
	// One key for every target: a majority that forgets a lock must
	// forget the same one.
	key := n.workload.keys[n.rng.IntN(len(n.workload.keys))]
	start := time.Now()
	var wg sync.WaitGroup
	for k, i := range targets {
		rng := rand.New(rand.NewPCG(n.rng.Uint64(), n.rng.Uint64()))
		wg.Go(func() {
			what, err := act(hctx, i, key, rng)
			whats[k], errs[k] = fmt.Sprintf("%s %d: %s", kind, i, what), err
		})
	}
	wg.Wait()
	end := time.Now()
	n.history.AddFault(checker.Fault{Kind: f.Name, Nodes: targets, Majority: t != Minority, Start: start, End: end})
	on := ""
	if keyed {
		on = " on key " + key
	}
	n.logf("nemesis: %s%s (%s) for %v from %s", f.Name, on, strings.Join(whats, "; "), end.Sub(start).Round(time.Millisecond), start.Format(clockLayout))
	return errors.Join(errs...)
}

func reshard(ctx context.Context, cf clusterFault, _ time.Duration) (string, error) {
	return cf.rc.Reshard(ctx, cf.node, cf.key, nil)
}

// migrateInFlight moves the key's slot key by key, dwelling up to d/2 with
// the slot MIGRATING before the first key moves and after each one: the
// clients' calls meet the slot half moved (the source serves the keys it
// still has and answers ASK or TRYAGAIN for the others), which the
// library must count as failed votes.
func migrateInFlight(ctx context.Context, cf clusterFault, d time.Duration) (string, error) {
	moved := 0
	what, err := cf.rc.Reshard(ctx, cf.node, cf.key, func(s redistest.MigrationStep) error {
		switch s.Kind {
		case redistest.SlotKeyMoved:
			moved++
		case redistest.SlotMigrating:
		default:
			return nil
		}
		cf.wait(randDuration(cf.rng, d/2))()
		return nil
	})
	return fmt.Sprintf("%s, %d keys moved one by one", what, moved), err
}

func clusterFailover(ctx context.Context, cf clusterFault, _ time.Duration) (string, error) {
	return cf.rc.Failover(ctx, cf.node, cf.key)
}

func clusterFailoverLosingWrites(ctx context.Context, cf clusterFault, d time.Duration) (string, error) {
	return cf.rc.FailoverLosingWrites(ctx, cf.node, cf.key, cf.wait(d))
}

// shardKill kills the key's master for d (0: restarts it at once).
func shardKill(ctx context.Context, cf clusterFault, d time.Duration) (string, error) {
	return cf.rc.KillShard(ctx, cf.node, cf.key, cf.wait(d))
}
