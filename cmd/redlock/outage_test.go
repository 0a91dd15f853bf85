package main

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// An outage is never reported as a busy lock: with two of three nodes down
// (killed, or stopped so that every round lasts the node timeout, longer
// than --wait), run --wait exits 69 and says so, also with --quiet, which
// silences only a busy lock. A cron job that stopped running because of an
// outage must not go unnoticed.
func TestRunWaitOutageIsUnavailable(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name  string
		apply func(*redistest.Server) error
	}{
		{"killed", (*redistest.Server).Kill},
		{"stopped", (*redistest.Server).Pause},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			servers := redistest.StartT(t, 3, redistest.Options{})
			for _, s := range servers[1:] {
				if err := f.apply(s); err != nil {
					t.Fatal(err)
				}
			}
			for _, quiet := range []bool{false, true} {
				args := []string{"run", "--nodes", nodesURL(servers), "--wait", "300ms", "--node-timeout", "500ms"}
				if quiet {
					args = append(args, "--quiet")
				}
				args = append(args, "k", "--", "echo", "ran")
				code, stdout, stderr := redlockRun(t, nil, args...)
				if code != exitUnavailable || !strings.Contains(stderr, "nodes unreachable") {
					t.Errorf("%s: exit code %d, want %d with a message that the nodes are unreachable; stderr:\n%s",
						strings.Join(args, " "), code, exitUnavailable, stderr)
				}
				if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 {
					t.Errorf("%s: the message takes %d lines, want one:\n%s", strings.Join(args, " "), lines, stderr)
				}
				if stdout != "" {
					t.Errorf("%s: the command ran: %q", strings.Join(args, " "), stdout)
				}
			}
		})
	}
}
