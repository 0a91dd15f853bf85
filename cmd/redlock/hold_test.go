package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	p.loseLock(servers, "lost while held")
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

// hold's script never outlives the lock: when the lock is lost (a majority
// paused), or while redlock itself cannot run (stopped with SIGSTOP, its
// watchdog kills the group), every process of the script's process group
// is dead before the next holder starts, though the script and its child
// ignore SIGTERM. The script starts "redlock hold" in the background, as
// a non-interactive shell does, in its own process group.
func TestHoldKillsItsScript(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc to tell zombies apart")
	}
	// "$0" is the pid file, "$1" the key, "$2" the nodes, "$3" more
	// flags. The script writes its pids and hold's, says ready once hold
	// holds the lock, and how hold exited.
	const script = `trap '' TERM
mkfifo "$0.fifo"
redlock hold $3 --nodes "$2" --ttl 3s --node-timeout 500ms --wait 20s "$1" > "$0.fifo" &
hold=$!
echo $hold > "$0.hold"
read -r fence < "$0.fifo" || exit 1
(trap '' TERM; exec sleep 100) & echo $! >> "$0"
echo $$ >> "$0"
echo "ready $fence"
wait $hold
echo "hold exited $?"
wait`
	for _, tt := range []struct {
		name   string
		fault  string
		noKill bool
	}{
		{"majority paused", "pause", false},
		{"redlock stopped", "stop", false},
		// The opt-out: the script runs on.
		{"majority paused, --no-kill-group", "pause", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			servers := redistest.StartT(t, 3, redistest.Options{})
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pids")
			t.Cleanup(func() { killAll(t, pidFile); killAll(t, pidFile+".hold") })
			key := t.Name()
			env := []string{"PATH=" + filepath.Dir(binary) + ":/usr/bin:/bin"}
			flags := ""
			if tt.noKill {
				flags = "--no-kill-group"
			}
			p := startProgram(t, env, "sh", "-c", script, pidFile, key, nodesURL(servers), flags)
			p.stdout.await(t, "ready")
			data, err := os.ReadFile(pidFile + ".hold")
			if err != nil {
				t.Fatal(err)
			}
			holdPid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			switch tt.fault {
			case "pause":
				pauseWhile(t, servers[:2], func() { p.stderr.await(t, "lost while held") })
			case "stop":
				if err := syscall.Kill(holdPid, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = syscall.Kill(holdPid, syscall.SIGCONT) })
			}

			if tt.noKill {
				p.stdout.await(t, fmt.Sprintf("hold exited %d", exitLost))
				if !processAlive(p.cmd.Process.Pid) {
					t.Errorf("the script died with --no-kill-group:\n%s", p.stderr)
				}
				// The script leads its group (see startProgram).
				if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				p.expect(128 + int(syscall.SIGKILL))
				return
			}

			argv, henv := helperCommand(t, "dead")
			next := start(t, henv, append([]string{"run", "--nodes", nodesURL(servers), "--wait", "30s", key, "--"}, append(argv, pidFile)...)...)
			next.expect(0)
			if out := next.stdout.String(); strings.Contains(out, "alive") || !strings.Contains(out, "dead 2 of 2") {
				t.Errorf("the next holder started while hold's script ran:\n%s\nthe script's stderr:\n%s", out, p.stderr)
			}
			// The script died of SIGKILL.
			p.expect(128 + int(syscall.SIGKILL))
			t.Logf("the script's stderr:\n%s", p.stderr)
		})
	}
}
