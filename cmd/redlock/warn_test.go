package main

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// A run that succeeds with a node out says so in one line on standard
// error, naming the node and what one more failure does; --quiet and a
// run with every node up say nothing.
func TestRunWarnsNodeOut(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)
	if code, stdout, stderr := redlockRun(t, env, "run", "k", "--", "echo", "ran"); code != 0 || stdout != "ran" || stderr != "" {
		t.Fatalf("run with every node up: code %d, stdout %q, stderr %q; want 0, ran and nothing", code, stdout, stderr)
	}
	if err := servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := redlockRun(t, env, "run", "k", "--", "echo", "ran")
	if code != 0 || stdout != "ran" {
		t.Fatalf("run with a node out: code %d, stdout %q\n%s", code, stdout, stderr)
	}
	want := "redlock run: warning: node " + servers[2].Addr + " down: "
	if lines := strings.Split(stderr, "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "(one more node failure stops the locks)") {
		t.Errorf("run with a node out said:\n%s\nwant one line %q...(one more node failure stops the locks)", stderr, want)
	}
	if code, stdout, stderr := redlockRun(t, env, "run", "--quiet", "k", "--", "echo", "ran"); code != 0 || stdout != "ran" || stderr != "" {
		t.Errorf("run --quiet with a node out: code %d, stdout %q, stderr %q; want 0, ran and nothing", code, stdout, stderr)
	}
}
