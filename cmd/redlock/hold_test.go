package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// hold prints the fence once the lock is held, keeps it until a signal,
// then releases it.
func TestHold(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			key := t.Name()
			p := start(t, sharedEnv(), "hold", "--fencing", key)
			line := p.stdout.await(t, "")
			if fence, err := strconv.ParseUint(line, 10, 64); err != nil || fence == 0 {
				t.Fatalf("hold printed %q, want a positive fencing token", line)
			}
			held := 0
			for _, v := range keyOn(t, sharedNodes, key) {
				if v != "" {
					held++
				}
			}
			if held < 2 {
				t.Errorf("the lock is on %d of 3 nodes while held", held)
			}
			if code, _, stderr := redlockRun(t, sharedEnv(), "hold", "-n", key); code != exitBusy || !strings.Contains(stderr, "busy") {
				t.Errorf("a second hold: code %d, want %d\n%s", code, exitBusy, stderr)
			}
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			p.expect(0)
			assertFree(t, sharedNodes, key)
		})
	}
}

func TestHoldWithoutFencingPrintsZero(t *testing.T) {
	t.Parallel()
	p := start(t, sharedEnv(), "hold", t.Name())
	if line := p.stdout.await(t, ""); line != "0" {
		t.Errorf("hold printed %q, want 0", line)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.expect(0)
	assertFree(t, sharedNodes, t.Name())
}

func TestHoldLost(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	// --wait retries a first dial slower than the node timeout.
	p := start(t, nodesEnv(servers), "hold", "--ttl", "1s", "--node-timeout", "300ms", "--wait", "20", t.Name())
	p.stdout.await(t, "0")
	for _, s := range servers[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	p.expect(exitLost)
	p.stderr.await(t, "lost while held")
}

// The README's pattern: a bash script that locks around several commands.
// (Without the exec, the coproc's pid is a subshell's: killing it would
// leave redlock holding the lock.)
func TestHoldScriptPattern(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	key := t.Name()
	script := `
coproc LOCK { exec redlock hold --fencing --wait 10s "$1"; }
pid=$LOCK_PID
trap 'kill "$pid" 2>/dev/null' EXIT
read -r fence <&"${LOCK[0]}" || { wait "$pid"; exit; }
echo "fence=$fence"
redlock run "$1" -- true; echo "inner=$?"
kill "$pid"; wait "$pid"; echo "hold=$?"
`
	// redlock is on the PATH, as it would be for a user.
	env := append(sharedEnv(), "PATH="+filepath.Dir(binary)+":/usr/bin:/bin")
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", script, "bash", key)
	cmd.Env = env
	// Should the script leave a redlock behind, holding its output open.
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("script: %v\n%s", err, out)
	}
	got := string(out)
	for _, want := range []string{"fence=", "inner=75", "hold=0"} {
		if !strings.Contains(got, want) {
			t.Errorf("the script's output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "fence=\n") || strings.Contains(got, "fence=0\n") {
		t.Errorf("no fencing token read:\n%s", got)
	}
	assertFree(t, sharedNodes, key)
}
