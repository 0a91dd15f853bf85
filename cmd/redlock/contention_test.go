package main

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// With one node of three dead and the key held elsewhere, run reports
// contention (75), not an outage (69), every time.
func TestRunBusyWithANodeDown(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	holder, err := redlock.New(redistest.ClientsT(t, servers[:2]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	// Held on the two nodes that stay up, for longer than the runs take
	// on a busy machine.
	if _, err := holder.TryObtain(t.Context(), "busy", redlock.WithTTL(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	env := nodesEnv(servers)
	for i := range 20 {
		code, _, stderr := redlockRun(t, env, "run", "--quiet", "busy", "--", "true")
		if code != exitBusy {
			t.Fatalf("run %d: code %d, want %d (busy)\n%s", i, code, exitBusy, stderr)
		}
	}
}

// Two URLs that reach one server are the deployment's mistake, found at
// the nodes: exit 78 with both addresses, not a usage error.
func TestRunSameServerTwiceIsConfig(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, redistest.Options{})
	fw := redistest.ForwardT(t, servers[0].Addr)
	// The third node answers late, so that the refusal of the second is
	// in hand when the round is decided.
	slow := redistest.ForwardT(t, servers[1].Addr)
	slow.SetDelay(300 * time.Millisecond)
	nodes := "redis://" + servers[0].Addr + ",redis://" + fw.Addr + ",redis://" + slow.Addr
	code, _, stderr := redlockRun(t, nil, "run", "--nodes", nodes, "twice", "--", "true")
	if code != exitConfig {
		t.Fatalf("code %d, want %d\n%s", code, exitConfig, stderr)
	}
	if !strings.Contains(stderr, servers[0].Addr) || !strings.Contains(stderr, fw.Addr) || strings.Contains(stderr, "usage:") {
		t.Fatalf("stderr does not name both addresses, or prints usage:\n%s", stderr)
	}
}
