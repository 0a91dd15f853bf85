package main

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// tableRows returns the rows of doctor's table, its header left out.
func tableRows(t *testing.T, stdout string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(stdout, "\n\n")
	header, rest, ok2 := strings.Cut(rest, "\n")
	if !ok || !ok2 || !strings.HasPrefix(header, "NODE ") {
		t.Fatalf("no table in doctor's output:\n%s", stdout)
	}
	table, _, _ := strings.Cut(rest, "\n\n")
	return strings.Split(strings.TrimSuffix(table, "\n"), "\n")
}

// shardFinding fails the test unless the report has a finding of check,
// with severity, about the shard of node, whose summary contains want.
func shardFinding(t *testing.T, rep reportJSON, check, severity, node, shard, want string) findingJSON {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Check == check && f.Severity.String() == severity && f.Node == node && f.Shard == shard && strings.Contains(f.Summary, want) {
			return f
		}
	}
	t.Fatalf("no %s %s finding on %q shard %q containing %q; problems:\n%s", severity, check, node, shard, want, problems(rep))
	return findingJSON{}
}

// doctor takes a cluster beside standalone masters: the cluster is one
// node of the quorum, and each of its masters a shard with the facts of a
// standalone master. The one shard without an append-only file is a
// warning, marked on its own row and named by its node and shard; the
// others are not.
func TestDoctorCluster(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, persistent)
	c := redistest.StartClusterT(t, redistest.ClusterOptions{Masters: 3, Server: persistent})
	lax := c.Nodes[1]
	admin := lax.NewClient()
	err := admin.ConfigSet(t.Context(), "appendonly", "no").Err()
	_ = admin.Close()
	if err != nil {
		t.Fatal(err)
	}
	nodes := "redis+cluster://" + c.Nodes[0].Addr + "," + urls(addrs(servers)...)
	cluster := "cluster " + c.Nodes[0].Addr

	rep := doctorJSON(t, nodes, exitWarnings)
	if len(rep.Nodes) != 3 || rep.Quorum != 2 {
		t.Fatalf("report: %d nodes, quorum %d; want 3, 2", len(rep.Nodes), rep.Quorum)
	}
	n := rep.Nodes[0]
	if n.Addr != cluster || n.Kind != "cluster" || n.Error != "" || n.Slots != redistest.Slots || len(n.Shards) != 3 {
		t.Fatalf("cluster node: %+v", n)
	}
	total := 0
	for i, s := range n.Shards {
		if s.Addr != c.Nodes[i].Addr || s.Kind != "cluster" || s.Role != "master" || !s.Cluster || s.RunID == "" ||
			s.ClusterState != "ok" || s.ClusterNodeTimeoutMs != 5000 || s.Slots == 0 || len(s.Shards) != 0 {
			t.Errorf("shard %d: %+v", i, s)
		}
		total += s.Slots
	}
	if total != redistest.Slots {
		t.Errorf("the shards serve %d slots in all, want %d", total, redistest.Slots)
	}
	if s := rep.Nodes[1]; s.Kind != "server" || s.Addr != servers[0].Addr || s.Shards != nil || s.Slots != 0 {
		t.Errorf("standalone node: %+v", s)
	}
	f := shardFinding(t, rep, "persistence", "warning", cluster, lax.Addr, "restarts lose locks")
	if f.Fix == "" {
		t.Errorf("no fix: %+v", f)
	}
	shardFinding(t, rep, "persistence", "ok", cluster, c.Nodes[0].Addr, "restarts keep locks")
	hasFinding(t, rep, "slots", "ok", cluster, "all 16384 slots served by 3 masters")
	hasFinding(t, rep, "persistence", "ok", servers[1].Addr, "restarts keep locks")

	// The table: the cluster's row, a row per master indented under it,
	// then the standalone masters'. Only the lax master's row is marked.
	code, stdout, stderr := redlockRun(t, nil, "doctor", "--clock-window", "0", "--nodes", nodes)
	if code != exitWarnings {
		t.Errorf("doctor: exit %d, want %d\n%s\n%s", code, exitWarnings, stdout, stderr)
	}
	rows := tableRows(t, stdout)
	want := []string{cluster + " ", "  " + c.Nodes[0].Addr + " ", "  " + lax.Addr + " ", "  " + c.Nodes[2].Addr + " ",
		servers[0].Addr + " ", servers[1].Addr + " "}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), stdout)
	}
	for i, row := range rows {
		marked := strings.Contains(row, "!")
		if !strings.HasPrefix(row, want[i]) || marked != (i == 2) {
			t.Errorf("row %d %q: want it to start %q, marked %v", i, row, want[i], i == 2)
		}
	}
	if !strings.Contains(rows[0], "16384 slots") || !strings.Contains(rows[2], "none !") {
		t.Errorf("cells:\n%s", stdout)
	}
	if !strings.Contains(stdout, "WARNING  "+cluster+" shard "+lax.Addr+"  persistence  ") {
		t.Errorf("the problem is not named by its node and shard:\n%s", stdout)
	}
}

// A Sentinel group is one node whose shard is the master its sentinels
// name, with the group's min-replicas settings.
func TestDoctorSentinel(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, persistent)
	g := redistest.StartSentinelGroupT(t, redistest.SentinelOptions{Server: persistent})
	master, err := g.Master(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range g.Servers {
		admin := s.NewClient()
		err := admin.ConfigSet(t.Context(), "min-replicas-to-write", "1").Err()
		_ = admin.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	nodes := "redis+sentinel://" + strings.Join(g.SentinelAddrs(), ",") + "/" + g.Name + "," + urls(addrs(servers)...)
	group := "sentinel " + g.Name + " " + strings.Join(g.SentinelAddrs(), ",")

	// The master's replica without the restart guard is a warning.
	rep := doctorJSON(t, nodes, exitWarnings)
	n := rep.Nodes[0]
	if n.Addr != group || n.Kind != "sentinel" || n.Error != "" || len(n.Shards) != 1 || len(n.Sentinels) != 3 {
		t.Fatalf("group node: %+v", n)
	}
	for _, s := range n.Sentinels {
		if s.Master != master.Addr || s.Error != "" {
			t.Errorf("sentinel %+v, want it to name %s", s, master.Addr)
		}
	}
	m := n.Shards[0]
	if m.Addr != master.Addr || m.Kind != "sentinel" || m.Role != "master" || m.Replicas != 1 || m.MinReplicasToWrite != 1 || m.MinReplicasMaxLag != 10 {
		t.Errorf("the group's master: %+v", m)
	}
	if s := rep.Nodes[1]; s.MinReplicasToWrite != -1 || s.Kind != "server" {
		t.Errorf("standalone node: kind %q, min_replicas_to_write %d; want server, -1 (not read)", s.Kind, s.MinReplicasToWrite)
	}
	shardFinding(t, rep, "failover", "ok", group, master.Addr, "min-replicas-to-write 1, min-replicas-max-lag 10s")
	hasFinding(t, rep, "failover", "warning", group, "the master has 1 replica(s) and the restart guard is off")
	hasFinding(t, rep, "sentinels", "ok", group, "the 3 sentinels name "+master.Addr)

	code, stdout, stderr := redlockRun(t, nil, "doctor", "--clock-window", "0", "--nodes", nodes)
	rows := tableRows(t, stdout)
	if code != exitWarnings || len(rows) != 4 || !strings.HasPrefix(rows[0], group+" ") || !strings.Contains(rows[0], "3/3 sentinels !") ||
		!strings.HasPrefix(rows[1], "  "+master.Addr+" ") || !strings.Contains(rows[1], "master+1 ") {
		t.Errorf("doctor: exit %d, want %d; table:\n%s\n%s", code, exitWarnings, stdout, stderr)
	}
}

// A cluster given twice, by two of its masters, is an error: each master
// would vote for both nodes. The same seed twice is refused before any
// node is asked, as the lock commands refuse it.
func TestDoctorClusterTwice(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterT(t, redistest.ClusterOptions{Masters: 3, Server: persistent})
	one, two := "cluster "+c.Nodes[0].Addr, "cluster "+c.Nodes[1].Addr
	rep := doctorJSON(t, "redis+cluster://"+c.Nodes[0].Addr+",redis+cluster://"+c.Nodes[1].Addr, exitErrors)
	for _, m := range c.Nodes {
		f := shardFinding(t, rep, "identity", "error", two, m.Addr, "same server as "+one+" shard "+m.Addr)
		if f.Fix == "" {
			t.Errorf("no fix: %+v", f)
		}
		shardFinding(t, rep, "identity", "ok", one, m.Addr, "run_id")
	}

	code, stdout, stderr := redlockRun(t, nil, "doctor", "--clock-window", "0", "--nodes", "redis+cluster://"+c.Nodes[0].Addr+",redis+cluster://"+c.Nodes[0].Addr)
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "the same node ("+one+")") {
		t.Errorf("the same seed twice: exit %d, want %d\n%s\n%s", code, exitUsage, stdout, stderr)
	}
}

// A cluster whose slot map cannot be read is an unreachable node: its
// row says so, and doctor exits 69.
func TestDoctorClusterUnreachable(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, persistent)
	nodes := "redis+cluster://127.0.0.1:1," + urls(addrs(servers)...)
	rep := doctorJSON(t, nodes, exitUnavailable)
	if len(rep.Unreachable) != 1 || rep.Unreachable[0] != "cluster 127.0.0.1:1" || rep.Nodes[0].Error == "" || rep.Nodes[0].Kind != "cluster" {
		t.Errorf("unreachable %q, node %+v", rep.Unreachable, rep.Nodes[0])
	}
	hasFinding(t, rep, "reach", "error", "cluster 127.0.0.1:1", "unreachable")
	code, stdout, stderr := redlockRun(t, nil, "doctor", "--clock-window", "0", "--nodes", nodes)
	if rows := tableRows(t, stdout); code != exitUnavailable || len(rows) != 3 || !strings.HasPrefix(rows[0], "cluster 127.0.0.1:1 ") || !strings.Contains(rows[0], "unreachable !!") {
		t.Errorf("doctor: exit %d, want %d\n%s\n%s", code, exitUnavailable, stdout, stderr)
	}
}
