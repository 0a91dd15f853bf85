package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// doctorWindow keeps the tests' clock windows short: the fast clock's rate
// is far beyond what a short window can miss.
const doctorWindow = "500ms"

// persistent are servers that keep every write: no persistence warning
// hides the finding a test is about.
var persistent = redistest.Options{Persistent: true}

// doctorJSON runs doctor --json over nodes (a comma-separated URL list),
// checks its exit code, and returns the report.
func doctorJSON(t *testing.T, nodes string, wantCode int, args ...string) reportJSON {
	t.Helper()
	argv := append([]string{"doctor", "--json", "--clock-window", doctorWindow, "--nodes", nodes}, args...)
	code, stdout, stderr := redlockRun(t, nil, argv...)
	var rep reportJSON
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("doctor --json: exit %d, %v\nstdout: %s\nstderr: %s", code, err, stdout, stderr)
	}
	if code != wantCode || rep.ExitCode != wantCode {
		t.Errorf("doctor: exit %d (report says %d), want %d\n%s\nstderr: %s", code, rep.ExitCode, wantCode, problems(rep), stderr)
	}
	return rep
}

// problems lists the report's findings that are not ok, for messages.
func problems(rep reportJSON) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		if f.Severity.String() != "ok" {
			fmt.Fprintf(&b, "%s %s %s: %s\n", f.Severity, f.Check, f.Node, f.Summary)
		}
	}
	return b.String()
}

// hasFinding fails the test unless the report has a finding of check, with
// severity, about node ("" for the whole set), whose summary contains want.
func hasFinding(t *testing.T, rep reportJSON, check, severity, node, want string) findingJSON {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Check == check && f.Severity.String() == severity && f.Node == node && strings.Contains(f.Summary, want) {
			return f
		}
	}
	t.Fatalf("no %s %s finding on %q containing %q; problems:\n%s", severity, check, node, want, problems(rep))
	return findingJSON{}
}

func urls(addrs ...string) string {
	for i, a := range addrs {
		addrs[i] = "redis://" + a
	}
	return strings.Join(addrs, ",")
}

func addrs(servers []*redistest.Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr
	}
	return out
}

func TestDoctorHealthy(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, persistent)
	rep := doctorJSON(t, urls(addrs(servers)...), exitOK)
	if len(rep.Nodes) != 3 || rep.Quorum != 2 || rep.Severity.String() != "ok" {
		t.Errorf("report: %d nodes, quorum %d, severity %v", len(rep.Nodes), rep.Quorum, rep.Severity)
	}
	for _, n := range rep.Nodes {
		if n.Error != "" || n.RunID == "" || n.Role != "master" || n.AppendFsync != "always" || n.ClockRate == 0 || !n.Guard.Known {
			t.Errorf("node %+v", n)
		}
	}
	hasFinding(t, rep, "persistence", "ok", servers[0].Addr, "restarts keep locks")
	hasFinding(t, rep, "nodes", "ok", "", "3 nodes, quorum 2")

	// The table.
	code, stdout, stderr := redlockRun(t, nil, "doctor", "--clock-window", doctorWindow, "--nodes", urls(addrs(servers)...))
	if code != exitOK || !strings.Contains(stdout, "all is well") || strings.Contains(stdout, "!") {
		t.Errorf("doctor: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"NODE", "PERSISTENCE", servers[2].Addr, "aof always", "noeviction"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table does not show %q:\n%s", want, stdout)
		}
	}
}

func TestDoctorReplica(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, persistent)
	replica := redistest.StartReplicaT(t, servers[2], persistent)
	rep := doctorJSON(t, urls(servers[0].Addr, servers[1].Addr, replica.Addr), exitErrors)
	f := hasFinding(t, rep, "role", "error", replica.Addr, "a replica of")
	if !strings.Contains(f.Fix, "REPLICAOF NO ONE") {
		t.Errorf("fix: %q", f.Fix)
	}
}

func TestDoctorEvictingPolicy(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, persistent)
	lru := redistest.StartT(t, 1, redistest.Options{Persistent: true, Args: []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"}})[0]
	rep := doctorJSON(t, urls(servers[0].Addr, servers[1].Addr, lru.Addr), exitErrors)
	f := hasFinding(t, rep, "memory", "error", lru.Addr, "maxmemory-policy allkeys-lru with maxmemory 64.0MB may evict lock keys")
	if !strings.Contains(f.Fix, "noeviction") {
		t.Errorf("fix: %q", f.Fix)
	}
	hasFinding(t, rep, "memory", "ok", servers[0].Addr, "noeviction")
}

func TestDoctorAlias(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, persistent)
	alias := redistest.ForwardT(t, servers[0].Addr)
	rep := doctorJSON(t, urls(servers[0].Addr, servers[1].Addr, alias.Addr), exitErrors)
	hasFinding(t, rep, "identity", "error", alias.Addr, "same server as "+servers[0].Addr)
	hasFinding(t, rep, "identity", "ok", servers[0].Addr, "run_id")
}

func TestDoctorFastClock(t *testing.T) {
	t.Parallel()
	env, err := redistest.ClockRateEnv(1.5)
	if err != nil {
		t.Fatal(err)
	}
	servers := redistest.StartT(t, 2, persistent)
	fast := redistest.StartT(t, 1, redistest.Options{Persistent: true, Env: env})[0]
	rep := doctorJSON(t, urls(servers[0].Addr, servers[1].Addr, fast.Addr), exitWarnings)
	hasFinding(t, rep, "clock", "warning", fast.Addr, "rate beyond the drift factor 1%")
	hasFinding(t, rep, "clock", "warning", "", "beyond the drift factor")
	hasFinding(t, rep, "clock", "ok", servers[0].Addr, "offset")
	n := rep.Nodes[2]
	if n.ClockRate < 1.4 || n.ClockRate > 1.6 {
		t.Errorf("fast clock's rate %v, want about 1.5", n.ClockRate)
	}
}

func TestDoctorRestartGuard(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, persistent)
	nodes := urls(addrs(servers)...)
	const guard = "--restart-guard=30s"

	// A fresh cluster used with the guard: bootstrap needed.
	rep := doctorJSON(t, nodes, exitWarnings, guard)
	hasFinding(t, rep, "guard", "warning", servers[0].Addr, "bootstrap needed")
	if !rep.Nodes[0].Guard.BootstrapNeeded {
		t.Errorf("guard state %+v", rep.Nodes[0].Guard)
	}
	if code, _, stderr := redlockRun(t, nil, "bootstrap", "--nodes", nodes); code != 0 {
		t.Fatalf("bootstrap: exit %d: %s", code, stderr)
	}
	rep = doctorJSON(t, nodes, exitOK, guard)
	hasFinding(t, rep, "guard", "ok", servers[2].Addr, "marker current")
	hasFinding(t, rep, "persistence", "ok", servers[2].Addr, "guard on and effective")

	// A restart keeps the marker (appendfsync always) but not the run_id:
	// the marker is stale, and the node abstains at its next guarded
	// acquisition. The guard is seen in use without --restart-guard too.
	if err := servers[2].Restart(); err != nil {
		t.Fatal(err)
	}
	rep = doctorJSON(t, nodes, exitWarnings)
	hasFinding(t, rep, "guard", "warning", servers[2].Addr, "marker stale: the server restarted")
	if code, _, stderr := redlockRun(t, nil, "run", guard, "--nodes", nodes, "k", "--", "true"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	rep = doctorJSON(t, nodes, exitWarnings, guard)
	hasFinding(t, rep, "guard", "warning", servers[2].Addr, "abstains for ")
	// The guard's 30s and two fence windows of 100ms (see acquire.lua).
	if g := rep.Nodes[2].Guard; g.AbstainMs <= 0 || g.AbstainMs > 30200 || !g.Current {
		t.Errorf("abstaining node's guard state %+v", g)
	}
}

func TestDoctorNoEval(t *testing.T) {
	t.Parallel()
	const password = "no-eval-S3cret"
	servers := redistest.StartT(t, 3, persistent)
	c := servers[1].NewClient()
	err := c.Do(t.Context(), "ACL", "SETUSER", "locker", "on", ">"+password, "~*", "&*", "+@all", "-@scripting").Err()
	_ = c.Close()
	if err != nil {
		t.Fatal(err)
	}
	restricted := "redis://locker:" + password + "@" + servers[1].Addr
	nodes := urls(servers[0].Addr) + "," + restricted + "," + urls(servers[2].Addr)
	rep := doctorJSON(t, nodes, exitErrors)
	f := hasFinding(t, rep, "scripts", "error", servers[1].Addr, "NOPERM")
	if !strings.Contains(f.Fix, "+evalsha") {
		t.Errorf("fix: %q", f.Fix)
	}
	code, stdout, stderr := redlockRun(t, nil, "doctor", "--clock-window", "0", "--nodes", nodes)
	if code != exitErrors || !strings.Contains(stdout, "refused !!") {
		t.Errorf("doctor: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, password) {
		t.Errorf("the password is shown:\n%s\n%s", stdout, stderr)
	}
}

func TestDoctorConfigRefused(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{Persistent: true, Args: []string{"--rename-command", "CONFIG", ""}})
	rep := doctorJSON(t, urls(addrs(servers)...), exitWarnings)
	f := hasFinding(t, rep, "persistence", "warning", servers[0].Addr, "CONFIG refused")
	if !f.Unverified || !strings.Contains(f.Summary, "appendonly yes, appendfsync unknown") {
		t.Errorf("finding %+v", f)
	}
	// What INFO tells is still checked.
	hasFinding(t, rep, "memory", "ok", servers[0].Addr, "noeviction")
}

func TestDoctorUnreachable(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, persistent)
	rep := doctorJSON(t, urls(servers[0].Addr, servers[1].Addr, "127.0.0.1:1"), exitUnavailable)
	hasFinding(t, rep, "reach", "error", "127.0.0.1:1", "unreachable")
	if len(rep.Unreachable) != 1 || rep.Unreachable[0] != "127.0.0.1:1" {
		t.Errorf("unreachable: %v", rep.Unreachable)
	}
	hasFinding(t, rep, "persistence", "ok", servers[0].Addr, "restarts keep locks")
}

func TestDoctorUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"doctor", "extra"},
		{"doctor", "--clock-window", "-1s"},
		{"doctor", "--restart-guard", "-1s"},
		{"doctor", "--ttl", "0s"},
	} {
		code, _, stderr := redlockRun(t, sharedEnv(), args...)
		if code != exitUsage || !strings.Contains(stderr, "usage: redlock doctor") {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, exitUsage, stderr)
		}
	}
}
