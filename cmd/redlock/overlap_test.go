package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// checkDead is the "dead" helper: the next holder's command, which looks,
// as soon as it holds the lock, whether any process of the previous
// holder's command still runs. A zombie (dead, not yet reaped: its parent,
// redlock, may be stopped) counts as dead.
func checkDead(pidFile string) int {
	data, err := os.ReadFile(pidFile)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	pids := strings.Fields(string(data))
	dead := 0
	for _, f := range pids {
		pid, err := strconv.Atoi(f)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		if processAlive(pid) {
			fmt.Println("alive", pid)
			continue
		}
		dead++
	}
	fmt.Printf("dead %d of %d\n", dead, len(pids))
	return 0
}

// processAlive reports whether pid runs (exists and is not a zombie).
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	state := strings.Fields(string(rest))[0]
	return state != "Z" && state != "X"
}

// The next holder of a lock (or leader of an election) never starts
// before every process of the previous holder's command is dead: when the
// command ignores SIGTERM, when it leaves a process that ignores SIGTERM
// behind, when it exits normally leaving a process running, when redlock
// itself is stopped (SIGSTOP) so that nothing extends the lock, and when
// redlock is killed.
// Each command writes its pids to a file; the next holder's command, as
// soon as it runs, looks whether any of them still runs.
func TestNoOverlapWithNextHolder(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc to tell zombies apart")
	}
	// Each script writes its pids to the file "$0" and prints ready.
	const (
		ignoresTerm = `trap '' TERM; echo $$ >> "$0"; echo ready; exec sleep 100`
		// The shell dies of SIGTERM; its child ignores it.
		leavesChild = `(trap '' TERM; exec sleep 100) & echo $! >> "$0"; echo $$ >> "$0"; echo ready; wait`
		// The shell exits at once; its child ends by itself 2s later.
		exitsEarly = `(exec sleep 2) & echo $! >> "$0"; echo $$ >> "$0"; echo ready`
	)
	type fault int
	const (
		none fault = iota
		majorityPaused
		redlockStopped
		redlockKilled
	)
	tests := []struct {
		name   string
		script string
		fault  fault
		pids   int
		code   int // the first redlock's exit code
	}{
		{"ignores TERM, majority paused", ignoresTerm, majorityPaused, 1, exitLost},
		{"leaves a child that ignores TERM, majority paused", leavesChild, majorityPaused, 2, exitLost},
		{"exits leaving a child", exitsEarly, none, 2, 0},
		{"redlock stopped", ignoresTerm, redlockStopped, 1, exitLost},
		{"leaves a child that ignores TERM, redlock stopped", leavesChild, redlockStopped, 2, exitLost},
		// The kernel kills the command's first process with redlock
		// (Linux's parent-death signal), not its child.
		{"leaves a child that ignores TERM, redlock killed", leavesChild, redlockKilled, 2, 128 + int(syscall.SIGKILL)},
	}
	for _, sub := range []string{"run", "elect"} {
		for _, tt := range tests {
			t.Run(sub+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				servers := redistest.StartT(t, 3, redistest.Options{})
				pidFile := filepath.Join(t.TempDir(), "pids")
				t.Cleanup(func() { killAll(t, pidFile) })
				// A grace far beyond the validity: SIGKILL must come
				// before the validity ends whatever it says.
				args := []string{sub, "--nodes", nodesURL(servers), "--ttl", "3s", "--node-timeout", "500ms", "--grace", "20s", "--wait", "20s"}
				p := start(t, nil, append(args, t.Name(), "--", "sh", "-c", tt.script, pidFile)...)
				p.stdout.await(t, "ready")
				switch tt.fault {
				case majorityPaused:
					pauseWhile(t, servers[:2], func() { p.stderr.await(t, "lost while the command ran") })
				case redlockStopped:
					if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) })
				case redlockKilled:
					if err := p.cmd.Process.Kill(); err != nil {
						t.Fatal(err)
					}
				}

				argv, env := helperCommand(t, "dead")
				next := start(t, env, append([]string{sub, "--nodes", nodesURL(servers), "--wait", "30s", t.Name(), "--"}, append(argv, pidFile)...)...)
				next.expect(0)
				out := next.stdout.String()
				if strings.Contains(out, "alive") || !strings.Contains(out, fmt.Sprintf("dead %d of %d", tt.pids, tt.pids)) {
					t.Errorf("the next holder started while the first's command ran:\n%s\nfirst redlock's stderr:\n%s", out, p.stderr)
				}

				if tt.fault == redlockStopped {
					if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
						t.Fatal(err)
					}
				}
				p.expect(tt.code)
			})
		}
	}
}

// killAll kills every process whose pid is in the file, so that a failed
// test leaves none behind.
func killAll(t *testing.T, pidFile string) {
	t.Helper()
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && processAlive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// pauseWhile pauses servers (SIGSTOP) until wait returns, then resumes
// them; a test that fails meanwhile resumes them at its cleanup.
func pauseWhile(t *testing.T, servers []*redistest.Server, wait func()) {
	t.Helper()
	for _, s := range servers {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Resume()
		}
	})
	wait()
	for _, s := range servers {
		if err := s.Resume(); err != nil {
			t.Fatal(err)
		}
	}
}
