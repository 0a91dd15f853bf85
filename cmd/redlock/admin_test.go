package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestInspect(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)
	key := "report"

	code, stdout, stderr := redlockRun(t, env, "inspect", key)
	if code != 0 || !strings.Contains(stdout, "not held") || strings.Count(stdout, " free ") != 3 {
		t.Errorf("inspect of a free lock: code %d\n%s\n%s", code, stdout, stderr)
	}

	holder := start(t, env, "run", "--metadata", "job=daily", key, "--", "sh", "-c", holdScript)
	holder.stdout.await(t, "ready")
	code, stdout, stderr = redlockRun(t, env, "inspect", key)
	if code != 0 {
		t.Fatalf("inspect: code %d\n%s", code, stderr)
	}
	for _, want := range []string{`lock "report": held by `, "on 3 of 3 nodes (2 needed)", "NODE", "METADATA"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("inspect output does not contain %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "job=daily"); n != 3 {
		t.Errorf("metadata shown on %d nodes, want 3:\n%s", n, stdout)
	}
	for _, s := range servers {
		if !strings.Contains(stdout, s.Addr+"  held") {
			t.Errorf("no held row for %s:\n%s", s.Addr, stdout)
		}
	}

	code, stdout, stderr = redlockRun(t, env, "inspect", "--json", key)
	if code != 0 {
		t.Fatalf("inspect --json: code %d\n%s", code, stderr)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, stdout)
	}
	if st.Key != key || st.Holder == "" || st.Quorum != 2 || len(st.Nodes) != 3 {
		t.Errorf("inspect --json: %+v", st)
	}
	for _, n := range st.Nodes {
		if !n.Held || n.Token != st.Holder || n.Metadata != "job=daily" || n.TTLMs <= 0 || n.Holds != 1 {
			t.Errorf("inspect --json node: %+v", n)
		}
	}

	// One node down: still a majority, the row says what went wrong.
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = redlockRun(t, env, "inspect", key)
	if code != 0 || !strings.Contains(stdout, servers[2].Addr+"  error") || !strings.Contains(stdout, "on 2 of 3 nodes") {
		t.Errorf("inspect with a node down: code %d\n%s\n%s", code, stdout, stderr)
	}
	holder.release()
	holder.expect(0)

	// Two down: no majority answered.
	if err := servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = redlockRun(t, env, "inspect", key)
	if code != exitUnavailable || !strings.Contains(stderr, "nodes unreachable") || strings.Count(stdout, "  error ") != 2 {
		t.Errorf("inspect with two nodes down: code %d, want %d\n%s\n%s", code, exitUnavailable, stdout, stderr)
	}
}

func TestForceRelease(t *testing.T) {
	t.Parallel()
	key := t.Name()
	holder := start(t, sharedEnv(), "run", "--metadata", "stuck-job", key, "--", "sh", "-c", holdScript)
	holder.stdout.await(t, "ready")

	// Without --yes: shows the holder, removes nothing.
	code, stdout, stderr := redlockRun(t, sharedEnv(), "release", "--force", key)
	if code != exitNotRemoved || strings.Contains(stderr, "usage:") || !strings.Contains(stderr, "stuck-job") || !strings.Contains(stderr, "without --yes") || stdout != "" {
		t.Errorf("release without --yes: code %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for i, v := range keyOnAll(t, sharedNodes, key) {
		if v == "" {
			t.Errorf("key gone from node %d without --yes", i)
		}
	}

	code, stdout, stderr = redlockRun(t, sharedEnv(), "release", "--force", "--yes", key)
	if code != 0 || !strings.Contains(stdout, "removed lock") {
		t.Errorf("release --force --yes: code %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	assertFree(t, sharedNodes, key)

	// The holder's command still ends with its own code; its release
	// finds the lock gone and says that it was force-released.
	holder.release()
	holder.expect(0)
	holder.stderr.await(t, "warning: releasing")
	holder.stderr.await(t, "force-released")
}

func TestReleaseNodesUnreachable(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)
	for _, s := range servers[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr := redlockRun(t, env, "release", "--force", "--yes", "k")
	if code != exitUnavailable || !strings.Contains(stderr, "nodes unreachable") {
		t.Errorf("release with two of three nodes down: code %d, want %d\n%s", code, exitUnavailable, stderr)
	}
	code, _, stderr = redlockRun(t, env, "run", "k", "--", "echo", "ran")
	if code != exitUnavailable || !strings.Contains(stderr, "nodes unreachable") {
		t.Errorf("run with two of three nodes down: code %d, want %d\n%s", code, exitUnavailable, stderr)
	}
}

func TestBootstrapAndRestartGuard(t *testing.T) {
	t.Parallel()
	run := []string{"run", "--restart-guard", "1m", "--ttl", "10s", "k", "--", "echo", "ran"}

	// A fresh cluster under the guard abstains until the guard's maximum
	// TTL has passed: nodes that lost their memory look just like it.
	unseeded := redistest.StartT(t, 3, redistest.Options{})
	code, stdout, stderr := redlockRun(t, nodesEnv(unseeded), run...)
	if code != exitUnavailable || stdout != "" || !strings.Contains(stderr, "abstains") || !strings.Contains(stderr, `run "redlock bootstrap"`) {
		t.Errorf("run on an unseeded cluster: code %d (want %d), stdout %q\n%s", code, exitUnavailable, stdout, stderr)
	}

	// A cluster seeded by bootstrap votes at once.
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)
	code, stdout, stderr = redlockRun(t, env, "bootstrap")
	if code != 0 || !strings.Contains(stdout, "on all 3 nodes") {
		t.Fatalf("bootstrap: code %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = redlockRun(t, env, run...)
	if code != 0 || stdout != "ran" {
		t.Errorf("run on a seeded cluster: code %d, stdout %q\n%s", code, stdout, stderr)
	}
	// Bootstrap again is harmless.
	if code, _, stderr := redlockRun(t, env, "bootstrap"); code != 0 {
		t.Errorf("second bootstrap: code %d\n%s", code, stderr)
	}

	if err := servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = redlockRun(t, env, "bootstrap")
	if code != exitUnavailable {
		t.Errorf("bootstrap with a node down: code %d, want %d\n%s", code, exitUnavailable, stderr)
	}
}

// inspect shows each node's fencing counter after a fenced run.
func TestInspectShowsFence(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)
	if code, _, stderr := redlockRun(t, env, "run", "--fencing", "fenced", "--", "true"); code != 0 {
		t.Fatalf("fenced run: code %d\n%s", code, stderr)
	}
	code, stdout, stderr := redlockRun(t, env, "inspect", "--json", "fenced")
	if code != 0 {
		t.Fatalf("inspect: code %d\n%s", code, stderr)
	}
	var st struct {
		Nodes []struct {
			Fence uint64 `json:"fence"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatal(err)
	}
	// A majority holds the fence the run got (written back), a positive number.
	count := map[uint64]int{}
	for _, n := range st.Nodes {
		if n.Fence > 0 {
			count[n.Fence]++
		}
	}
	best, fence := 0, uint64(0)
	for f, c := range count {
		if c > best {
			best, fence = c, f
		}
	}
	if best < 2 {
		t.Fatalf("no fence on a majority of nodes:\n%s", stdout)
	}
	// The table shows the same fence, in its FENCE column.
	if _, table, _ := redlockRun(t, env, "inspect", "fenced"); !strings.Contains(table, "FENCE") ||
		!strings.Contains(table, strconv.FormatUint(fence, 10)) {
		t.Fatalf("inspect table has no FENCE column with fence %d:\n%s", fence, table)
	}
}
