package doctor_test

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/locktest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/doctor"
)

// checkNodes runs CheckNodes over targets with judged, no clock window
// and opts, and fails the test on an error.
func checkNodes(t *testing.T, targets []doctor.Target, opts ...doctor.Option) *doctor.Report {
	t.Helper()
	opts = append(append(append([]doctor.Option{}, judged...), doctor.WithClockWindow(0)), opts...)
	rep, err := doctor.CheckNodes(t.Context(), targets, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// shardFinding returns the finding of check about the shard at addr of
// node whose summary contains want, failing the test with the whole
// report when there is none.
func shardFinding(t *testing.T, rep *doctor.Report, check, node, addr, want string) doctor.Finding {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Check == check && f.Node == node && f.Shard == addr && strings.Contains(f.Summary, want) {
			return f
		}
	}
	t.Fatalf("no %s finding on %s shard %s containing %q in:\n%s", check, node, addr, want, dump(rep))
	return doctor.Finding{}
}

// clusterClient is a cluster client that knows the cluster by the seeds
// given alone, closed at cleanup.
func clusterClient(t *testing.T, seeds ...string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, DialTimeout: time.Second, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A cluster is one node whose masters are its shards, each checked as a
// standalone master is: the one master without an append-only file is
// reported, the others not; every slot is served; its replicas without
// the guard are a warning. The check leaves no key behind.
func TestCheckNodesCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartClusterT(t, redistest.ClusterOptions{Masters: 3, Replicas: 1, Server: redistest.Options{Persistent: true}})
	lax := cl.Nodes[1]
	admin := lax.NewClient()
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.ConfigSet(t.Context(), "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	rep := checkNodes(t, []doctor.Target{doctor.Cluster(cl.ClusterClientT(t))})
	n := rep.Nodes[0]
	if n.Kind != doctor.KindCluster || n.Err != nil || n.Slots != redistest.Slots || len(n.Shards) != 3 {
		t.Fatalf("cluster node: kind %q, err %v, slots %d, %d shards\n%s", n.Kind, n.Err, n.Slots, len(n.Shards), dump(rep))
	}
	total := 0
	for i, s := range n.Shards {
		if s.Addr != cl.Nodes[i].Addr || s.Role != "master" || s.Replicas != 1 || !s.Cluster || s.ClusterState != "ok" ||
			s.ClusterNodeTimeout != 5*time.Second || s.RunID == "" || s.ScriptsErr != nil {
			t.Errorf("shard %d: %+v", i, s)
		}
		total += s.Slots
	}
	if total != redistest.Slots {
		t.Errorf("the shards serve %d slots in all", total)
	}
	f := shardFinding(t, rep, doctor.Persistence, n.Addr, lax.Addr, "restarts lose locks")
	if f.Severity != doctor.Warning || f.Fix == "" || f.Where() != n.Addr+" shard "+lax.Addr {
		t.Errorf("the shard without an AOF: %+v", f)
	}
	for _, m := range []*redistest.ClusterNode{cl.Nodes[0], cl.Nodes[2]} {
		shardFinding(t, rep, doctor.Persistence, n.Addr, m.Addr, "restarts keep locks")
		shardFinding(t, rep, doctor.Role, n.Addr, m.Addr, "master with 1 replica(s), serving")
	}
	finding(t, rep, doctor.Slots, n.Addr, "all 16384 slots served by 3 masters, cluster_state ok")
	f = finding(t, rep, doctor.Failover, n.Addr, "3 of 3 masters have replicas and the restart guard is off")
	if f.Severity != doctor.Warning || !strings.Contains(f.Summary, "cluster-node-timeout 5s") || !strings.Contains(f.Fix, "restart guard") {
		t.Errorf("failover finding: %+v", f)
	}
	if rep.Severity() != doctor.Warning {
		t.Errorf("report severity %v:\n%s", rep.Severity(), dump(rep))
	}
	for _, m := range cl.Nodes[:3] {
		c := m.NewClient()
		keys, err := c.Keys(t.Context(), "*").Result()
		_ = c.Close()
		if err != nil || len(keys) != 0 {
			t.Errorf("keys left on %s: %q, %v", m.Addr, keys, err)
		}
	}
}

// A quorum with a cluster keeps the guard's marker per slot on every
// node, a standalone one included: after Bootstrap, every slot's marker
// is current on every master; a flushed shard is reported with its
// slots' count, and only it.
func TestCheckNodesClusterGuard(t *testing.T) {
	t.Parallel()
	cl := redistest.StartClusterT(t, redistest.ClusterOptions{Masters: 2})
	single := redistest.StartT(t, 1, redistest.Options{})[0]
	cc, sc := cl.ClusterClientT(t), redistest.ClientsT(t, []*redistest.Server{single})[0]
	targets := []doctor.Target{doctor.Cluster(cc), doctor.Server(sc)}
	l := locktest.NodesT(t, []redlock.Node{redlock.Cluster(cc), redlock.Server(sc)}, slices.Concat(testOpts, []redlock.Option{redlock.WithRestartGuard(time.Minute)})...)
	guarded := doctor.WithRestartGuard(time.Minute)
	rep := checkNodes(t, targets, guarded)
	node := rep.Nodes[0].Addr
	if g := rep.Nodes[1].Guard; g.Slots != redistest.Slots || g.Unmarked != redistest.Slots || !g.BootstrapNeeded {
		t.Errorf("the standalone node of a fresh quorum with a cluster: %+v", g)
	}
	shardFinding(t, rep, doctor.Guard, node, cl.Nodes[0].Addr, "a fresh deployment): bootstrap needed")
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	rep = checkNodes(t, targets, guarded)
	finding(t, rep, doctor.Guard, single.Addr, "markers of all 16384 slots current")
	for i, s := range rep.Nodes[0].Shards {
		if g := s.Guard; !g.Known || !g.Current || g.Slots != s.Slots || g.Slots == 0 {
			t.Errorf("shard %d after Bootstrap: %+v", i, g)
		}
		shardFinding(t, rep, doctor.Guard, node, s.Addr, "markers of all "+strconv.Itoa(s.Slots)+" slots current")
	}
	if err := cl.FlushShard(t.Context(), cl.Nodes[1]); err != nil {
		t.Fatal(err)
	}
	rep = checkNodes(t, targets, guarded)
	flushed := rep.Nodes[0].Shards[1]
	f := shardFinding(t, rep, doctor.Guard, node, cl.Nodes[1].Addr, strconv.Itoa(flushed.Slots)+" of its "+strconv.Itoa(flushed.Slots)+" slots have no marker")
	if f.Severity != doctor.Warning || strings.Contains(f.Fix, "redlock bootstrap") {
		t.Errorf("flushed shard: %+v", f)
	}
	shardFinding(t, rep, doctor.Guard, node, cl.Nodes[0].Addr, "current")
	finding(t, rep, doctor.Guard, single.Addr, "current")
}

// One server reached through two nodes is an error: a cluster given again
// by another seed, or one of its masters given as a server beside it.
// The same seeds twice are refused before any node is asked, as
// redlock.NewNodes refuses them.
func TestCheckNodesClusterTwice(t *testing.T) {
	t.Parallel()
	cl := redistest.StartClusterT(t, redistest.ClusterOptions{Masters: 3})
	first, second := clusterClient(t, cl.Nodes[0].Addr), clusterClient(t, cl.Nodes[1].Addr)
	rep := checkNodes(t, []doctor.Target{doctor.Cluster(first), doctor.Cluster(second)})
	one, two := rep.Nodes[0].Addr, rep.Nodes[1].Addr
	for _, m := range cl.Nodes {
		f := shardFinding(t, rep, doctor.Identity, two, m.Addr, "same server as "+one+" shard "+m.Addr)
		if f.Severity != doctor.Error || f.Fix == "" {
			t.Errorf("identity: %+v", f)
		}
		shardFinding(t, rep, doctor.Identity, one, m.Addr, "run_id ")
	}
	finding(t, rep, doctor.Nodes, "", "only 1 of 2 nodes can grant a lock now")

	master := redistest.ClientsT(t, []*redistest.Server{cl.Nodes[2].Server})[0]
	rep = checkNodes(t, []doctor.Target{doctor.Cluster(first), doctor.Server(master)})
	f := finding(t, rep, doctor.Identity, cl.Nodes[2].Addr, "same server as "+one+" shard "+cl.Nodes[2].Addr)
	if f.Severity != doctor.Error || rep.Severity() != doctor.Error {
		t.Errorf("identity of the master given as a server: %+v", f)
	}
	finding(t, rep, doctor.Role, cl.Nodes[2].Addr, "a Redis Cluster node (cluster_enabled:1) given as one server")

	again := clusterClient(t, cl.Nodes[0].Addr)
	_, errCheck := doctor.CheckNodes(t.Context(), []doctor.Target{doctor.Cluster(first), doctor.Cluster(again)})
	_, errNew := redlock.NewNodes([]redlock.Node{redlock.Cluster(first), redlock.Cluster(again)})
	if !errors.Is(errCheck, redlock.ErrInvalid) || !errors.Is(errNew, redlock.ErrInvalid) {
		t.Errorf("the same seed twice: CheckNodes %v, NewNodes %v; want ErrInvalid from both", errCheck, errNew)
	}
}
