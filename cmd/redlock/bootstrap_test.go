package main

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// bootstrap's errors name no empty key, and tell a node that abstains
// (it lost its memory) from one that cannot be reached.
func TestBootstrapWording(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{Persistent: true})
	env := nodesEnv(servers)
	if code, _, stderr := redlockRun(t, env, "bootstrap"); code != 0 {
		t.Fatalf("bootstrap: code %d\n%s", code, stderr)
	}
	// Restarted with its data, node 0 has its marker with the old run's
	// stamp: it lost what it did not persist, and abstains. Node 2 is
	// down.
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := redlockRun(t, env, "bootstrap")
	if code != exitUnavailable || stdout != "" {
		t.Errorf("bootstrap: code %d, stdout %q; want %d\n%s", code, stdout, exitUnavailable, stderr)
	}
	if strings.Contains(stderr, `""`) {
		t.Errorf("bootstrap's error names an empty key:\n%s", stderr)
	}
	for _, want := range []string{"1 node abstains", "1 node unreachable", servers[0].Addr, servers[2].Addr,
		"redlock bootstrap --clear-quarantine", "if no lock can be held now", "wait out the guard's maximum TTL"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("bootstrap's error does not say %q:\n%s", want, stderr)
		}
	}
}

// The restart guard's first-use trap has a way out: one guarded run before
// bootstrap quarantines every node, plain bootstrap cannot clear that, and
// bootstrap --clear-quarantine does, but only while no lock key exists.
func TestBootstrapClearQuarantine(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)
	if code, _, stderr := redlockRun(t, env, "run", "--restart-guard", "60", "job", "--", "true"); code != exitUnavailable {
		t.Fatalf("guarded run before bootstrap: code %d, want %d (every node abstains)\n%s", code, exitUnavailable, stderr)
	}
	if code, _, stderr := redlockRun(t, env, "bootstrap"); code != exitUnavailable || !strings.Contains(stderr, "--clear-quarantine") {
		t.Fatalf("bootstrap of quarantined nodes: code %d, want %d naming --clear-quarantine\n%s", code, exitUnavailable, stderr)
	}
	// A lock key on one node: clearing is refused, nothing changes.
	clients := redistest.ClientsT(t, servers)
	if err := clients[1].Set(t.Context(), "held", "someone\x001\x00", 0).Err(); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := redlockRun(t, env, "bootstrap", "--clear-quarantine")
	if code != exitBusy || !strings.Contains(stderr, "held") {
		t.Fatalf("bootstrap --clear-quarantine with a lock key: code %d, want %d naming the key\n%s", code, exitBusy, stderr)
	}
	if code, _, stderr := redlockRun(t, env, "run", "--restart-guard", "60", "job", "--", "true"); code != exitUnavailable {
		t.Fatalf("guarded run after a refused clear: code %d, want %d\n%s", code, exitUnavailable, stderr)
	}
	if err := clients[1].Del(t.Context(), "held").Err(); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := redlockRun(t, env, "bootstrap", "--clear-quarantine"); code != 0 {
		t.Fatalf("bootstrap --clear-quarantine: code %d\n%s", code, stderr)
	}
	if code, _, stderr := redlockRun(t, env, "run", "--restart-guard", "60", "job", "--", "true"); code != 0 {
		t.Fatalf("guarded run after the clear: code %d\n%s", code, stderr)
	}
}
