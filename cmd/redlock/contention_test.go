package main

import (
	"testing"

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
	// Held on the two nodes that stay up.
	if _, err := holder.TryObtain(t.Context(), "busy"); err != nil {
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
