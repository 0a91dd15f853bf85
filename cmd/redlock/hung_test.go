package main

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// A node that accepts connections and never answers (or, over TLS, never
// completes the handshake) delays neither the command nor redlock's exit
// beyond a few node timeouts: the lock is taken and released on the other
// two nodes, and Close does not wait for the hung one.
func TestRunWithHungNode(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, redistest.Options{})
	for _, scheme := range []string{"redis", "rediss"} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel()
			h := redistest.HangT(t)
			nodes := nodesURL(servers) + "," + scheme + "://" + h.Addr
			started := time.Now()
			p := start(t, []string{envNodes + "=" + nodes}, "run", "--node-timeout", "500ms", t.Name(), "--", "echo", "ran")
			p.release()
			p.expect(0)
			// The bound is a few node timeouts plus the start of a
			// process built with -race on a loaded machine (a 200ms node
			// timeout saw even the healthy nodes time out at a load
			// average of 20); a wait on the hung node's own timeouts took
			// 10 s (50 s over TLS).
			if d := time.Since(started); d > 8*time.Second {
				t.Errorf("redlock run with a hung node took %v, want < 8s\nstderr:\n%s", d.Round(time.Millisecond), p.stderr)
			}
			if got := strings.TrimSpace(p.stdout.String()); got != "ran" {
				t.Errorf("stdout %q, want %q", got, "ran")
			}
			if h.Accepted() == 0 {
				t.Error("the hung node was never dialled: the test proves nothing")
			}
			assertReleased(t, servers, t.Name())
		})
	}
}
