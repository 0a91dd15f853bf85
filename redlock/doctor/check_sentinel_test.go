package doctor_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/doctor"
)

// setAll runs CONFIG SET name value on every server.
func setAll(t *testing.T, servers []*redistest.Server, name, value string) {
	t.Helper()
	for _, c := range redistest.ClientsT(t, servers) {
		if err := c.ConfigSet(t.Context(), name, value).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A Sentinel group is one node whose shard is the master its sentinels
// name. Without min-replicas-to-write a demoted master keeps taking
// writes: a warning, ok once set; more than the master's replicas is an
// error (it refuses every write). The master given as a server beside
// the group is an error; a sentinel that does not answer is a warning.
func TestCheckNodesSentinel(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroupT(t, redistest.SentinelOptions{Server: redistest.Options{Persistent: true}})
	master, err := g.Master(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	group := []doctor.Target{doctor.Sentinel(g.FailoverOptions())}
	rep := checkNodes(t, group)
	n := rep.Nodes[0]
	if n.Kind != doctor.KindSentinel || n.Err != nil || len(n.Shards) != 1 || n.Shards[0].Addr != master.Addr || len(n.Sentinels) != 3 {
		t.Fatalf("group node: %+v\n%s", n, dump(rep))
	}
	if s := n.Shards[0]; s.Role != "master" || s.Replicas != 1 || s.MinReplicasToWrite != 0 || s.MinReplicasMaxLag != 10 {
		t.Errorf("the group's master: %+v", s)
	}
	finding(t, rep, doctor.Sentinels, n.Addr, "the 3 sentinels name "+master.Addr)
	f := shardFinding(t, rep, doctor.Failover, n.Addr, master.Addr, "min-replicas-to-write 0")
	if f.Severity != doctor.Warning || !strings.Contains(f.Fix, "min-replicas-to-write 1") {
		t.Errorf("without min-replicas-to-write: %+v", f)
	}
	f = finding(t, rep, doctor.Failover, n.Addr, "the master has 1 replica(s) and the restart guard is off")
	if f.Severity != doctor.Warning {
		t.Errorf("replicas without the guard: %+v", f)
	}
	shardFinding(t, rep, doctor.Persistence, n.Addr, master.Addr, "restarts keep locks")

	setAll(t, g.Servers, "min-replicas-to-write", "1")
	rep = checkNodes(t, group, doctor.WithRestartGuard(time.Minute))
	f = shardFinding(t, rep, doctor.Failover, n.Addr, master.Addr, "min-replicas-to-write 1, min-replicas-max-lag 10s")
	if f.Severity != doctor.OK {
		t.Errorf("with min-replicas-to-write 1: %+v", f)
	}
	finding(t, rep, doctor.Failover, n.Addr, "the restart guard keeps a promoted replica out")

	setAll(t, g.Servers, "min-replicas-to-write", "2")
	rep = checkNodes(t, group)
	f = shardFinding(t, rep, doctor.Failover, n.Addr, master.Addr, "min-replicas-to-write 2 with 1 replica(s) connected")
	if f.Severity != doctor.Error {
		t.Errorf("more than its replicas: %+v", f)
	}
	shardFinding(t, rep, doctor.Scripts, n.Addr, master.Addr, "NOREPLICAS")
	setAll(t, g.Servers, "min-replicas-to-write", "1")

	alone := redistest.ClientsT(t, []*redistest.Server{master})[0]
	rep = checkNodes(t, append(group, doctor.Server(alone)))
	if f := finding(t, rep, doctor.Identity, master.Addr, "same server as "+n.Addr+" shard "+master.Addr); f.Severity != doctor.Error {
		t.Errorf("the master given as a server too: %+v", f)
	}

	if err := g.Sentinels[2].Kill(); err != nil {
		t.Fatal(err)
	}
	rep = checkNodes(t, group)
	f = finding(t, rep, doctor.Sentinels, n.Addr, "2 of 3 sentinels answer, naming "+master.Addr+"; "+g.Sentinels[2].Addr)
	if f.Severity != doctor.Warning || f.Fix == "" {
		t.Errorf("a sentinel down: %+v", f)
	}
}

// Nodes whose masters cannot be found are findings: a cluster whose seeds
// do not answer, a group whose sentinels do not.
func TestCheckNodesUnreachable(t *testing.T) {
	t.Parallel()
	dead := make([]string, 2)
	for i := range dead {
		port, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		dead[i] = "127.0.0.1:" + strconv.Itoa(port)
	}
	cc := clusterClient(t, dead[0])
	rep := checkNodes(t, []doctor.Target{doctor.Cluster(cc), doctor.Sentinel(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: dead[1:]})})
	cluster, group := "cluster "+dead[0], "sentinel m "+dead[1]
	for _, tc := range []struct{ node, want string }{
		{cluster, "cannot read the slot map (CLUSTER SLOTS)"},
		{group, "no sentinel names the master"},
	} {
		if f := finding(t, rep, doctor.Reach, tc.node, tc.want); f.Severity != doctor.Error || f.Fix == "" {
			t.Errorf("%s: %+v", tc.node, f)
		}
	}
	if got := rep.Unreachable(); len(got) != 2 || got[0] != cluster || got[1] != group {
		t.Errorf("unreachable: %q", got)
	}
	finding(t, rep, doctor.Nodes, "", "only 0 of 2 nodes can grant a lock now")
}

// Bad targets are errors matching ErrInvalid, on one line, before any
// node is asked.
func TestCheckNodesInvalid(t *testing.T) {
	t.Parallel()
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:2"}})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	seedless := redis.NewClusterClient(&redis.ClusterOptions{})
	t.Cleanup(func() { _, _, _, _ = plain.Close(), failover.Close(), cc.Close(), seedless.Close() })
	for _, tt := range []struct {
		name    string
		targets []doctor.Target
		want    string
	}{
		{"no targets", nil, "no nodes"},
		{"nil target", []doctor.Target{doctor.Server(plain), nil}, "node 1 is nil"},
		{"nil server", []doctor.Target{doctor.Server(nil)}, "node 0 is a Server of a nil client"},
		{"failover client", []doctor.Target{doctor.Server(failover)}, "give its FailoverOptions to redlock.Sentinel"},
		{"nil cluster", []doctor.Target{doctor.Cluster(nil)}, "node 0 is a Cluster of a nil client"},
		{"no seeds", []doctor.Target{doctor.Cluster(seedless)}, "no addresses"},
		{"nil sentinel", []doctor.Target{doctor.Sentinel(nil)}, "nil options"},
		{"no master name", []doctor.Target{doctor.Sentinel(&redis.FailoverOptions{SentinelAddrs: []string{"127.0.0.1:2"}})}, "no MasterName"},
		{"no sentinels", []doctor.Target{doctor.Sentinel(&redis.FailoverOptions{MasterName: "m"})}, "no SentinelAddrs"},
		{"replica only", []doctor.Target{doctor.Sentinel(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:2"}, ReplicaOnly: true})}, "ReplicaOnly"},
		{"empty sentinel address", []doctor.Target{doctor.Sentinel(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{""}})}, "empty address in SentinelAddrs"},
		{"seed as a server", []doctor.Target{doctor.Cluster(cc), doctor.Server(plain)}, "nodes 0 and 1 are the same node"},
		{"one group twice", []doctor.Target{
			doctor.Sentinel(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:2"}}),
			doctor.Sentinel(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"localhost:2", "127.0.0.1:3"}}),
		}, "nodes 0 and 1 are the same node"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := doctor.CheckNodes(t.Context(), tt.targets)
			if !errors.Is(err, redlock.ErrInvalid) || rep != nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("CheckNodes: %v, report %v; want ErrInvalid saying %q", err, rep != nil, tt.want)
			}
		})
	}
	if st := plain.PoolStats(); st.TotalConns != 0 || st.Misses != 0 {
		t.Errorf("a bad call used the client: %+v", st)
	}
}
