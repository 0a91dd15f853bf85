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
