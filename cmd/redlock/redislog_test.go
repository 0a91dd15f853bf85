package main

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// go-redis's own log lines ("redis: connection pool: failed to dial ...")
// about a dead node never reach stderr: redlock reports the node itself.
func TestDeadNodeNoRedisLogLines(t *testing.T) {
	t.Parallel()
	port, err := redistest.FreePort() // nobody listens there
	if err != nil {
		t.Fatal(err)
	}
	dead := "redis://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	live := nodesURL(sharedNodes[:2])
	tests := []struct {
		name  string
		args  []string
		code  int
		check string // in stdout or stderr
	}{
		{"run, one dead", []string{"run", "--verbose", "--nodes", live + "," + dead, "dead-node", "--", "true"}, 0, "released"},
		{"inspect, all dead", []string{"inspect", "--nodes", dead, "dead-node"}, exitUnavailable, "127.0.0.1:" + strconv.Itoa(port)},
		{"doctor, one dead", []string{"doctor", "--clock-window", "0", "--nodes", live + "," + dead}, -1, "127.0.0.1:" + strconv.Itoa(port)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := redlockRun(t, nil, tt.args...)
			if tt.code >= 0 && code != tt.code {
				t.Errorf("exit code %d, want %d\n%s", code, tt.code, stderr)
			}
			if !strings.Contains(stdout+stderr, tt.check) {
				t.Errorf("output does not name %q:\nstdout: %s\nstderr: %s", tt.check, stdout, stderr)
			}
			for _, line := range strings.Split(stderr, "\n") {
				if strings.HasPrefix(line, "redis: ") || strings.Contains(line, "connection pool") {
					t.Errorf("go-redis's log line on stderr: %q", line)
				}
			}
		})
	}
}
