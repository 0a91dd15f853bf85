package main

import (
	"strings"
	"testing"
	"time"
)

// TestRunLockDelay: --lock-delay reaches the servers (the keys live TTL plus
// the delay), a normal end still frees the key at once, and a killed redlock
// keeps the key from others past its TTL.
func TestRunLockDelay(t *testing.T) {
	t.Parallel()

	t.Run("clean end", func(t *testing.T) {
		t.Parallel()
		key := t.Name()
		p := start(t, sharedEnv(), "run", "--ttl", "2s", "--lock-delay", "30s", key, "--", "sh", "-c", holdScript)
		p.stdout.await(t, "ready")
		held := 0
		for _, s := range sharedNodes {
			d := pttl(t, s, key)
			if d == -2*time.Nanosecond { // not there (yet)
				continue
			}
			held++
			if d <= 2*time.Second || d > 32*time.Second {
				t.Errorf("key's TTL on %s is %v, want TTL 2s plus lock-delay 30s", s.Addr, d)
			}
		}
		if held < 2 {
			t.Errorf("key on %d of 3 nodes while the command runs", held)
		}
		p.release()
		p.expect(0)
		assertReleased(t, sharedNodes, key)
		if code, stdout, stderr := redlockRun(t, sharedEnv(), "run", key, "--", "echo", "ran"); code != 0 || stdout != "ran" {
			t.Errorf("run after a clean end: code %d, stdout %q\n%s", code, stdout, stderr)
		}
	})

	t.Run("killed", func(t *testing.T) {
		t.Parallel()
		key := t.Name()
		const ttl = time.Second
		// A 1s TTL leaves time to extend it only with a short node timeout.
		p := start(t, sharedEnv(), "run", "--ttl", ttl.String(), "--node-timeout", "200ms", "--lock-delay", "30s", key, "--", "sh", "-c", holdScript)
		p.stdout.await(t, "ready")
		began := time.Now()
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// Past the TTL, the key is still held: the delay.
		wait := time.NewTimer(ttl + 500*time.Millisecond)
		<-wait.C
		code, stdout, stderr := redlockRun(t, sharedEnv(), "run", key, "--", "echo", "ran")
		if code != exitBusy || stdout != "" {
			t.Errorf("run %v after redlock was killed: code %d, stdout %q; want %d and no run\n%s", time.Since(began), code, stdout, exitBusy, stderr)
		}
		// Its command, orphaned, ends as its standard input closes with
		// redlock's end.
		p.wait()
	})

	t.Run("bad values", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"--lock-delay", "-1s"}, "--lock-delay -1s must not be negative"},
			{[]string{"--lock-delay", "soon"}, `invalid value "soon" for flag --lock-delay`},
			{[]string{"--restart-guard", "1m", "--ttl", "40s", "--lock-delay", "30s"}, "plus lock-delay 30s is above the restart guard's maximum TTL 1m0s"},
		} {
			// No node is asked: a port nobody listens on, so that a
			// regression cannot leave restart-guard keys on shared nodes.
			args := append(append([]string{"run", "--nodes", "redis://127.0.0.1:1"}, tt.args...), "k", "--", "echo", "ran")
			code, stdout, stderr := redlockRun(t, nil, args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "usage: redlock run") {
				t.Errorf("%s: code %d, stdout %q; want %d and %q\n%s", strings.Join(tt.args, " "), code, stdout, exitUsage, tt.want, stderr)
			}
		}
	})

	t.Run("help", func(t *testing.T) {
		t.Parallel()
		code, stdout, _ := redlockRun(t, nil, "run", "--help")
		if code != 0 || !strings.Contains(stdout, "--lock-delay duration") {
			t.Errorf("run --help: code %d, no --lock-delay:\n%s", code, stdout)
		}
	})
}
