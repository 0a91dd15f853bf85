package main

import (
	"strings"
	"testing"
	"time"
)

// run's flags from flock(1): -n, -w SECONDS, --wait forever, -E and
// --outage-exit-code; and a busy message that names the holder.
func TestRunFlockFlags(t *testing.T) {
	t.Parallel()
	key := t.Name()
	holder := start(t, sharedEnv(), "run", "--metadata", "job=nightly host=a", key, "--", "sh", "-c", holdScript)
	holder.stdout.await(t, "ready")

	code, stdout, stderr := redlockRun(t, sharedEnv(), "run", "-n", key, "--", "echo", "ran")
	if code != exitBusy || stdout != "" {
		t.Errorf("-n on a busy lock: code %d, stdout %q; want %d and no run", code, stdout, exitBusy)
	}
	if !strings.Contains(stderr, "busy, held by job=nightly host=a (") {
		t.Errorf("the busy message does not name the holder's metadata:\n%s", stderr)
	}
	if code, _, stderr := redlockRun(t, sharedEnv(), "run", "-E", "3", key, "--", "echo", "ran"); code != 3 {
		t.Errorf("-E 3 on a busy lock: code %d, want 3\n%s", code, stderr)
	}
	if code, _, stderr := redlockRun(t, sharedEnv(), "run", "--conflict-exit-code", "0", "--quiet", key, "--", "echo", "ran"); code != 0 || stderr != "" {
		t.Errorf("--conflict-exit-code 0 --quiet on a busy lock: code %d, stderr %q; want 0 and nothing said", code, stderr)
	}
	// -w takes bare seconds.
	began := time.Now()
	if code, _, stderr := redlockRun(t, sharedEnv(), "run", "-w", "0.3", key, "--", "echo", "ran"); code != exitBusy {
		t.Errorf("-w 0.3 on a busy lock: code %d, want %d\n%s", code, exitBusy, stderr)
	}
	if waited := time.Since(began); waited < 300*time.Millisecond {
		t.Errorf("-w 0.3 gave up after %v", waited)
	}

	waiter := start(t, sharedEnv(), "run", "--wait", "forever", "--verbose", key, "--", "echo", "ran")
	waiter.stderr.await(t, "waiting forever")
	holder.release()
	holder.expect(0)
	waiter.expect(0)
	if got := waiter.stdout.String(); got != "ran" {
		t.Errorf("--wait forever: stdout %q, want the command's output", got)
	}
	assertReleased(t, sharedNodes, key)
}

func TestRunOutageExitCode(t *testing.T) {
	t.Parallel()
	args := []string{"run", "--nodes", "redis://127.0.0.1:1", "--outage-exit-code", "9", "k", "--", "echo", "ran"}
	code, stdout, stderr := redlockRun(t, nil, args...)
	if code != 9 || stdout != "" || !strings.Contains(stderr, "nodes unreachable") {
		t.Errorf("an outage with --outage-exit-code 9: code %d, stdout %q; want 9, no run, and the outage reported\n%s", code, stdout, stderr)
	}
}

// Durations take bare seconds everywhere.
func TestRunBareSeconds(t *testing.T) {
	t.Parallel()
	key := t.Name()
	code, _, stderr := redlockRun(t, sharedEnv(), "run", "--ttl", "30", "--node-timeout", "0.5", "--cooldown", "20", key, "--", "true")
	if code != 0 {
		t.Fatalf("exit code %d\n%s", code, stderr)
	}
	if d := pttl(t, sharedNodes[0], key); d <= 0 || d > 20*time.Second {
		t.Errorf("key's TTL after --cooldown 20 is %v, want at most 20s", d)
	}
}

// The command does not see REDLOCK_NODES, which may hold passwords,
// unless --pass-nodes asks for it.
func TestRunKeepsNodesFromCommand(t *testing.T) {
	t.Parallel()
	key := t.Name()
	show := []string{"sh", "-c", `echo "nodes=${REDLOCK_NODES-unset}"`}
	code, stdout, stderr := redlockRun(t, sharedEnv(), append([]string{"run", key, "--"}, show...)...)
	if code != 0 || stdout != "nodes=unset" {
		t.Errorf("without --pass-nodes: code %d, stdout %q, want nodes=unset\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = redlockRun(t, sharedEnv(), append([]string{"run", "--pass-nodes", key, "--"}, show...)...)
	if want := "nodes=" + nodesURL(sharedNodes); code != 0 || stdout != want {
		t.Errorf("with --pass-nodes: code %d, stdout %q, want %q\n%s", code, stdout, want, stderr)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--version", "-V"} {
		code, stdout, stderr := redlockRun(t, nil, flag)
		if code != 0 || !strings.HasPrefix(stdout, "redlock ") || !strings.Contains(stdout, "go1.") {
			t.Errorf("redlock %s: code %d, stdout %q, want \"redlock VERSION GOVERSION\"\n%s", flag, code, stdout, stderr)
		}
	}
}
