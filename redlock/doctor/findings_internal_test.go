package doctor

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// errRefused stands for a node's error.
var errRefused = errors.New("redlock: node overloaded: too many calls queued")

// healthyNode is the facts of a node that meets every assumption.
func healthyNode(addr, run string) Node {
	return Node{
		Addr: addr, Latency: time.Millisecond, MaxLatency: 2 * time.Millisecond, Version: "7.0.15", RunID: run, Role: "master",
		AppendOnly: "yes", AppendFsync: "always", MaxMemory: 0, UsedMemory: 1 << 20, EvictedKeys: 0, MaxMemoryPolicy: "noeviction",
		ClockUncertainty: 100 * time.Microsecond, ClockRate: 1, ClockRateUncertainty: 0.0001,
		Guard: GuardState{Known: true},
	}
}

// The thresholds of the assessment: each case changes one fact of the
// last of three healthy nodes, under TTL 10s and drift factor 0.01 (a
// drift allowance of 102ms), and expects a finding of that severity whose
// summary contains want.
func TestAssess(t *testing.T) {
	tests := []struct {
		name   string
		change func(n *Node)
		check  string
		sev    Severity
		want   string
	}{
		{"healthy", func(*Node) {}, Clock, OK, "offset"},
		{"offset within the allowance", func(n *Node) { n.ClockOffset = 100 * time.Millisecond }, Clock, OK, "offset +100ms"},
		{"offset within its uncertainty", func(n *Node) {
			n.ClockOffset, n.ClockUncertainty = 110*time.Millisecond, 10*time.Millisecond
		}, Clock, OK, "offset +110ms ±10ms"},
		{"offset beyond the allowance", func(n *Node) { n.ClockOffset = -150 * time.Millisecond }, Clock, Warning, "offset beyond the drift allowance 102ms"},
		{"rate within the factor", func(n *Node) { n.ClockRate = 1.009 }, Clock, OK, "rate +0.900%"},
		{"rate within its uncertainty", func(n *Node) { n.ClockRate, n.ClockRateUncertainty = 1.015, 0.01 }, Clock, OK, "rate +1.500%"},
		{"rate beyond the factor", func(n *Node) { n.ClockRate = 0.98 }, Clock, Warning, "rate beyond the drift factor 1%"},
		{"slow node", func(n *Node) { n.MaxLatency = 600 * time.Millisecond }, Reach, Warning, "above half the node timeout"},
		{"no headroom", func(n *Node) { n.MaxMemory, n.UsedMemory = 100<<20, 95<<20 }, Memory, Warning, "(5% free): acquisitions fail"},
		{"headroom", func(n *Node) { n.MaxMemory, n.UsedMemory = 100<<20, 50<<20 }, Memory, OK, "(50% free)"},
		{"evicting policy", func(n *Node) { n.MaxMemory, n.MaxMemoryPolicy = 100<<20, "volatile-ttl" }, Memory, Error, "volatile-ttl with maxmemory 100.0MB"},
		{"evicting policy, no maxmemory", func(n *Node) { n.MaxMemoryPolicy = "allkeys-lru" }, Memory, Warning, "as soon as a maxmemory is set"},
		{"everysec", func(n *Node) { n.AppendFsync = "everysec" }, Persistence, Warning, "restarts may lose"},
		{"snapshots", func(n *Node) { n.AppendOnly, n.AppendFsync, n.Save = "no", "", "3600 1" }, Persistence, Warning, "reloads an older snapshot"},
		{"replicas", func(n *Node) { n.Replicas = 2 }, Role, Warning, "2 replica(s)"},
		{"cluster", func(n *Node) { n.Cluster = true }, Role, Error, "Redis Cluster"},
		{"old server", func(n *Node) { n.Version = "6.2.14" }, Version, OK, "Redis 6.2.14"},
		{"duplicate", func(n *Node) { n.RunID = "b" }, Identity, Error, "same server as n1"},
		{"unreachable", func(n *Node) { n.Err = errRefused }, Reach, Error, "unreachable"},
		{"INFO refused", func(n *Node) {
			*n = Node{Addr: n.Addr, InfoErr: errRefused, MaxMemory: -1, UsedMemory: -1, EvictedKeys: -1, AppendOnly: "yes", AppendFsync: "always",
				GuardErr: errRefused}
		}, Role, Warning, "role not verified"},
		{"INFO refused, memory", func(n *Node) {
			*n = Node{Addr: n.Addr, InfoErr: errRefused, MaxMemory: -1, UsedMemory: -1, EvictedKeys: -1}
		}, Memory, Warning, "maxmemory-policy not verified"},
	}
	cfg := defaultConfig()
	cfg.ttl, cfg.window = 10*time.Second, time.Second
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []Node{healthyNode("n0", "a"), healthyNode("n1", "b"), healthyNode("n2", "c")}
			tt.change(&nodes[2])
			rep := assess(nodes, &cfg, 2)
			for _, f := range rep.Findings {
				if f.Node == "n2" && f.Check == tt.check {
					if f.Severity != tt.sev || !strings.Contains(f.Summary, tt.want) {
						t.Errorf("%v %q, want %v containing %q", f.Severity, f.Summary, tt.sev, tt.want)
					}
					if (f.Severity == OK) != (f.Fix == "") {
						t.Errorf("severity %v with fix %q", f.Severity, f.Fix)
					}
					return
				}
			}
			t.Errorf("no %s finding on n2", tt.check)
		})
	}
}

func TestAssessNodes(t *testing.T) {
	for _, tt := range []struct {
		n, need int
		sev     Severity
		want    string
	}{
		{1, 1, Warning, "single-node mode"},
		{2, 2, Warning, "one failed node stops every lock"},
		{3, 2, OK, "tolerates 1 node failed"},
		{4, 3, Warning, "as 3 nodes would"},
		{5, 3, OK, "tolerates 2 nodes failed"},
	} {
		var nodes []Node
		for i := range tt.n {
			nodes = append(nodes, healthyNode(string(rune('a'+i)), string(rune('A'+i))))
		}
		f := countFindings(nodes, tt.need, false)
		if len(f) != 1 || f[0].Severity != tt.sev || !strings.Contains(f[0].Summary, tt.want) {
			t.Errorf("%d nodes: %+v, want %v containing %q", tt.n, f, tt.sev, tt.want)
		}
	}
	// Too few can vote: two of three are replicas, abstaining or gone.
	nodes := []Node{healthyNode("a", "A"), healthyNode("b", "B"), healthyNode("c", "C")}
	nodes[1].Role = "slave"
	nodes[2].Guard.Abstain = time.Second
	f := countFindings(nodes, 2, true)
	if len(f) != 2 || f[1].Severity != Error || !strings.Contains(f[1].Summary, "only 1 of 3 nodes can grant a lock") {
		t.Errorf("findings %+v", f)
	}
}

// An unreachable node's fix says what the error points at: credentials,
// the ACL, a database, TLS, or else the node's address.
func TestReachFix(t *testing.T) {
	for _, tc := range []struct{ err, want string }{
		{"WRONGPASS invalid username-password pair", "correct the user name or password"},
		{"NOAUTH Authentication required.", "give this node's password"},
		{"NOPERM this user has no permissions", "ACL SETUSER"},
		{"ERR DB index is out of range", "give a database the server has"},
		{"redlock: TLS handshake with 127.0.0.1:7001: context deadline exceeded", "agree about TLS"},
		{"tls: first record does not look like a TLS handshake", "agree about TLS"},
		{"TLS mismatch: the server speaks TLS on this port and the client does not", "agree about TLS"},
		{"EOF", "if it speaks TLS on this port, use a rediss:// URL"},
		{"dial tcp 127.0.0.1:1: connect: connection refused", "start the node or correct its address"},
	} {
		if got := reachFix(errors.New(tc.err)); !strings.Contains(got, tc.want) {
			t.Errorf("reachFix(%q) = %q, want it to say %q", tc.err, got, tc.want)
		}
	}
}

// clusterNode is a cluster of three healthy masters, each serving a third
// of the slots.
func clusterNode() Node {
	n := Node{Addr: "cluster c", Kind: KindCluster, Slots: 16384}
	for i, run := range []string{"a", "b", "c"} {
		s := healthyNode("m"+run, run)
		s.Kind, s.Cluster, s.ClusterState, s.Slots = KindCluster, true, "ok", 16384/3+min(i, 1)
		n.Shards = append(n.Shards, s)
	}
	return n
}

// The findings about a cluster or Sentinel group as a whole: each case
// changes one fact and expects a finding of that severity whose summary
// contains want.
func TestGroupFindings(t *testing.T) {
	group := func() Node {
		m := healthyNode("m", "r")
		m.Kind, m.Replicas, m.MinReplicasToWrite, m.MinReplicasMaxLag = KindSentinel, 1, 1, 10
		return Node{Addr: "sentinel g", Kind: KindSentinel, Shards: []Node{m},
			Sentinels: []SentinelAnswer{{Addr: "s1", Master: "m"}, {Addr: "s2", Master: "m"}, {Addr: "s3", Master: "m"}}}
	}
	tests := []struct {
		name   string
		node   func() Node
		change func(n *Node)
		check  string
		sev    Severity
		want   string
	}{
		{"whole", clusterNode, func(*Node) {}, Slots, OK, "all 16384 slots served by 3 masters"},
		{"slots unserved", clusterNode, func(n *Node) { n.Slots = 16000 }, Slots, Warning, "384 of 16384 slots served by no master"},
		{"state fail", clusterNode, func(n *Node) { n.Shards[1].ClusterState = "fail" }, Slots, Error, "cluster_state not ok on mb (fail)"},
		{"CLUSTER INFO refused", clusterNode, func(n *Node) { n.Shards[2].ClusterErr = errRefused }, Slots, Warning, "cluster_state not verified"},
		{"no replicas", clusterNode, func(*Node) {}, Failover, OK, "no master has a replica"},
		{"replicas, no guard", clusterNode, func(n *Node) { n.Shards[0].Replicas = 1 }, Failover, Warning, "1 of 3 masters have replicas and the restart guard is off"},
		{"node timeouts", clusterNode, func(n *Node) {
			n.Shards[2].Replicas = 1
			n.Shards[0].ClusterNodeTimeout, n.Shards[1].ClusterNodeTimeout = 15*time.Second, 5*time.Second
		}, Failover, Warning, "cluster-node-timeout 5s: a failed master's slots vote no for that long and an election (up to 15s on some masters)"},
		{"sentinels agree", group, func(*Node) {}, Sentinels, OK, "the 3 sentinels name m"},
		{"sentinels disagree", group, func(n *Node) { n.Sentinels[2].Master = "r2" }, Sentinels, Warning, "the sentinels name 2 masters (m by 2, r2 by 1)"},
		{"a sentinel silent", group, func(n *Node) { n.Sentinels[1] = SentinelAnswer{Addr: "s2", Err: errRefused} }, Sentinels, Warning, "2 of 3 sentinels answer, naming m; s2: node overloaded"},
		{"min-replicas unknown", group, func(n *Node) { n.Shards[0].MinReplicasToWrite, n.Shards[0].ConfigErr = -1, errRefused }, Failover, Warning, "min-replicas-to-write not verified"},
		{"min-replicas off", group, func(n *Node) { n.Shards[0].MinReplicasToWrite = 0 }, Failover, Warning, "min-replicas-to-write 0: after a failover"},
		{"min-replicas on", group, func(*Node) {}, Failover, OK, "min-replicas-to-write 1, min-replicas-max-lag 10s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.node()
			tt.change(&n)
			var got []string
			for _, f := range groupFindings(&n, false) {
				if f.Check != tt.check {
					continue
				}
				if f.Severity == tt.sev && strings.Contains(f.Summary, tt.want) && (f.Severity == OK) == (f.Fix == "") {
					return
				}
				got = append(got, f.Severity.String()+" "+f.Summary+" [fix: "+f.Fix+"]")
			}
			t.Errorf("no %v %s finding containing %q; got %q", tt.sev, tt.check, tt.want, got)
		})
	}
}

// A cluster votes when all its masters do; a master that abstains in some
// of its slots still votes in the others; a master seen before does not.
func TestVotesCluster(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(n *Node)
		want   bool
	}{
		{"healthy", func(*Node) {}, true},
		{"some slots abstain", func(n *Node) {
			n.Shards[0].Guard = GuardState{Known: true, Slots: 5461, Abstaining: 10, Abstain: time.Second}
		}, true},
		{"every slot abstains", func(n *Node) {
			n.Shards[0].Guard = GuardState{Known: true, Slots: 5461, Abstaining: 5461, Abstain: time.Second}
		}, false},
		{"a master unreachable", func(n *Node) { n.Shards[1].Err = errRefused }, false},
		{"state fail", func(n *Node) { n.Shards[2].ClusterState = "fail" }, false},
		{"masters not found", func(n *Node) { n.Err, n.Shards = errRefused, nil }, false},
	} {
		n := clusterNode()
		tt.change(&n)
		if got := votes(&n, true, map[string]bool{}); got != tt.want {
			t.Errorf("%s: votes %v, want %v", tt.name, got, tt.want)
		}
	}
	n := clusterNode()
	if votes(&n, false, map[string]bool{"b": true}) {
		t.Error("a cluster with a master seen before votes")
	}
}
