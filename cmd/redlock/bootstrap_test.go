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
	for _, want := range []string{"1 node abstains", "1 node unreachable", servers[0].Addr, servers[2].Addr} {
		if !strings.Contains(stderr, want) {
			t.Errorf("bootstrap's error does not say %q:\n%s", want, stderr)
		}
	}
}
