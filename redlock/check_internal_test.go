package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/conn"

	"strings"
	"testing"
	"time"
)

// healthyNode is the facts of a node that meets every assumption.
func healthyNode(addr, run string) NodeReport {
	return NodeReport{
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
		change func(n *NodeReport)
		check  string
		sev    Severity
		want   string
	}{
		{"healthy", func(*NodeReport) {}, CheckClock, SeverityOK, "offset"},
		{"offset within the allowance", func(n *NodeReport) { n.ClockOffset = 100 * time.Millisecond }, CheckClock, SeverityOK, "offset +100ms"},
		{"offset within its uncertainty", func(n *NodeReport) {
			n.ClockOffset, n.ClockUncertainty = 110*time.Millisecond, 10*time.Millisecond
		}, CheckClock, SeverityOK, "offset +110ms ±10ms"},
		{"offset beyond the allowance", func(n *NodeReport) { n.ClockOffset = -150 * time.Millisecond }, CheckClock, SeverityWarning, "offset beyond the drift allowance 102ms"},
		{"rate within the factor", func(n *NodeReport) { n.ClockRate = 1.009 }, CheckClock, SeverityOK, "rate +0.900%"},
		{"rate within its uncertainty", func(n *NodeReport) { n.ClockRate, n.ClockRateUncertainty = 1.015, 0.01 }, CheckClock, SeverityOK, "rate +1.500%"},
		{"rate beyond the factor", func(n *NodeReport) { n.ClockRate = 0.98 }, CheckClock, SeverityWarning, "rate beyond the drift factor 1%"},
		{"slow node", func(n *NodeReport) { n.MaxLatency = 600 * time.Millisecond }, CheckReach, SeverityWarning, "above half the node timeout"},
		{"no headroom", func(n *NodeReport) { n.MaxMemory, n.UsedMemory = 100<<20, 95<<20 }, CheckMemory, SeverityWarning, "(5% free): acquisitions fail"},
		{"headroom", func(n *NodeReport) { n.MaxMemory, n.UsedMemory = 100<<20, 50<<20 }, CheckMemory, SeverityOK, "(50% free)"},
		{"evicting policy", func(n *NodeReport) { n.MaxMemory, n.MaxMemoryPolicy = 100<<20, "volatile-ttl" }, CheckMemory, SeverityError, "volatile-ttl with maxmemory 100.0MB"},
		{"evicting policy, no maxmemory", func(n *NodeReport) { n.MaxMemoryPolicy = "allkeys-lru" }, CheckMemory, SeverityWarning, "as soon as a maxmemory is set"},
		{"everysec", func(n *NodeReport) { n.AppendFsync = "everysec" }, CheckPersistence, SeverityWarning, "restarts may lose"},
		{"snapshots", func(n *NodeReport) { n.AppendOnly, n.AppendFsync, n.Save = "no", "", "3600 1" }, CheckPersistence, SeverityWarning, "reloads an older snapshot"},
		{"replicas", func(n *NodeReport) { n.Replicas = 2 }, CheckRole, SeverityWarning, "2 replica(s)"},
		{"cluster", func(n *NodeReport) { n.Cluster = true }, CheckRole, SeverityError, "Redis Cluster"},
		{"old server", func(n *NodeReport) { n.Version = "6.2.14" }, CheckVersion, SeverityOK, "Redis 6.2.14"},
		{"duplicate", func(n *NodeReport) { n.RunID = "b" }, CheckIdentity, SeverityError, "same server as n1"},
		{"unreachable", func(n *NodeReport) { n.Err = conn.ErrOverloaded }, CheckReach, SeverityError, "unreachable"},
		{"INFO refused", func(n *NodeReport) {
			*n = NodeReport{Addr: n.Addr, InfoErr: conn.ErrOverloaded, MaxMemory: -1, UsedMemory: -1, EvictedKeys: -1, AppendOnly: "yes", AppendFsync: "always",
				GuardErr: conn.ErrOverloaded}
		}, CheckRole, SeverityWarning, "role not verified"},
		{"INFO refused, memory", func(n *NodeReport) {
			*n = NodeReport{Addr: n.Addr, InfoErr: conn.ErrOverloaded, MaxMemory: -1, UsedMemory: -1, EvictedKeys: -1}
		}, CheckMemory, SeverityWarning, "maxmemory-policy not verified"},
	}
	cfg := defaultConfig()
	cfg.ttl = 10 * time.Second
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []NodeReport{healthyNode("n0", "a"), healthyNode("n1", "b"), healthyNode("n2", "c")}
			tt.change(&nodes[2])
			rep := assess(nodes, &cfg, 2, time.Second)
			for _, f := range rep.Findings {
				if f.Node == "n2" && f.Check == tt.check {
					if f.Severity != tt.sev || !strings.Contains(f.Summary, tt.want) {
						t.Errorf("%v %q, want %v containing %q", f.Severity, f.Summary, tt.sev, tt.want)
					}
					if (f.Severity == SeverityOK) != (f.Fix == "") {
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
		{1, 1, SeverityWarning, "single-node mode"},
		{2, 2, SeverityWarning, "one failed node stops every lock"},
		{3, 2, SeverityOK, "tolerates 1 node failed"},
		{4, 3, SeverityWarning, "as 3 nodes would"},
		{5, 3, SeverityOK, "tolerates 2 nodes failed"},
	} {
		var nodes []NodeReport
		for i := range tt.n {
			nodes = append(nodes, healthyNode(string(rune('a'+i)), string(rune('A'+i))))
		}
		f := countFindings(nodes, tt.need, false)
		if len(f) != 1 || f[0].Severity != tt.sev || !strings.Contains(f[0].Summary, tt.want) {
			t.Errorf("%d nodes: %+v, want %v containing %q", tt.n, f, tt.sev, tt.want)
		}
	}
	// Too few can vote: two of three are replicas, abstaining or gone.
	nodes := []NodeReport{healthyNode("a", "A"), healthyNode("b", "B"), healthyNode("c", "C")}
	nodes[1].Role = "slave"
	nodes[2].Guard.Abstain = time.Second
	f := countFindings(nodes, 2, true)
	if len(f) != 2 || f[1].Severity != SeverityError || !strings.Contains(f[1].Summary, "only 1 of 3 nodes can grant a lock") {
		t.Errorf("findings %+v", f)
	}
}
