package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// holdScript prints "ready" and holds the lock until the test closes the
// command's standard input.
const holdScript = `echo ready; read x; echo done`

func sharedEnv() []string { return nodesEnv(sharedNodes) }

// nodesEnv is the environment that points the command at servers.
func nodesEnv(servers []*redistest.Server) []string {
	return []string{envNodes + "=" + nodesURL(servers)}
}

func TestRunPassesExitCode(t *testing.T) {
	t.Parallel()
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		command []string
		want    int
		stderr  string
	}{
		{"success", []string{"true"}, 0, ""},
		{"failure", []string{"sh", "-c", "exit 7"}, 7, ""},
		{"high code", []string{"sh", "-c", "exit 200"}, 200, ""},
		{"killed by a signal", []string{"sh", "-c", "kill -TERM $$"}, 128 + int(syscall.SIGTERM), ""},
		{"not found", []string{"no-such-command-here"}, exitNotFound, "cannot run"},
		{"not executable", []string{notExec}, exitCannotRun, "cannot run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := t.Name()
			code, _, stderr := redlockRun(t, sharedEnv(), append([]string{"run", key, "--"}, tt.command...)...)
			if code != tt.want {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tt.want, stderr)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not mention %q", stderr, tt.stderr)
			}
			assertReleased(t, sharedNodes, key)
		})
	}
}

func TestRunGivesCommandItsIO(t *testing.T) {
	t.Parallel()
	p := start(t, sharedEnv(), "run", t.Name(), "--", "sh", "-c", `read x; echo "got $x"; echo oops >&2; echo "$0 $1"`, "a b", "c")
	if _, err := p.stdin.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	p.release()
	p.expect(0)
	if got, want := p.stdout.String(), "got hello\na b c"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := p.stderr.String(); got != "oops" {
		t.Errorf("stderr %q, want %q", got, "oops")
	}
}

func TestRunBusy(t *testing.T) {
	t.Parallel()
	key := t.Name()
	// Two runs at once: one gets the lock and holds it, the other must
	// report it busy. With three nodes and two contenders one of them
	// always has a majority.
	a := start(t, sharedEnv(), "run", key, "--", "sh", "-c", holdScript)
	b := start(t, sharedEnv(), "run", key, "--", "sh", "-c", holdScript)
	var winner, loser *proc
	select {
	case <-a.done:
		winner, loser = b, a
	case <-b.done:
		winner, loser = a, b
	case <-time.After(waitLimit):
		t.Fatalf("neither run ended; stderr:\n%s\n%s", a.stderr, b.stderr)
	}
	loser.expect(exitBusy)
	if s := loser.stderr.String(); !strings.Contains(s, "busy") || !strings.Contains(s, "held by another") {
		t.Errorf("busy run's stderr does not say the lock is held:\n%s", s)
	}
	if s := loser.stdout.String(); s != "" {
		t.Errorf("busy run's command ran: %q", s)
	}
	winner.stdout.await(t, "ready")

	// While it is held, --quiet says nothing and still exits with 75.
	code, stdout, stderr := redlockRun(t, sharedEnv(), "run", "--quiet", key, "--", "echo", "ran")
	if code != exitBusy || stdout != "" || stderr != "" {
		t.Errorf("--quiet busy run: code %d, stdout %q, stderr %q; want %d and no output", code, stdout, stderr, exitBusy)
	}

	winner.release()
	winner.expect(0)
	assertFree(t, sharedNodes, key)
}

func TestRunWaitsInOrder(t *testing.T) {
	t.Parallel()
	key := t.Name()
	log := filepath.Join(t.TempDir(), "log")
	a := start(t, sharedEnv(), "run", key, "--", "sh", "-c", `echo ready; read x; echo a-end >> "$0"`, log)
	a.stdout.await(t, "ready")

	// A wait shorter than the holder's run gives up with "busy".
	short := start(t, sharedEnv(), "run", "--wait", "200ms", key, "--", "sh", "-c", `echo short-ran >> "$0"`, log)
	short.expect(exitBusy)

	b := start(t, sharedEnv(), "run", "--wait", "20s", "--verbose", key, "--", "sh", "-c", `echo b-start >> "$0"`, log)
	b.stderr.await(t, "waiting up to 20s")
	a.release()
	a.expect(0)
	b.expect(0)
	b.stderr.await(t, "obtained")

	got, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a-end\nb-start\n"; string(got) != want {
		t.Errorf("log %q, want %q: the waiting run did not run after the holder", got, want)
	}
	assertReleased(t, sharedNodes, key)
}

func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			key := t.Name()
			argv, env := helperCommand(t, "signal")
			p := start(t, append(sharedEnv(), env...), append([]string{"run", key, "--"}, argv...)...)
			p.stdout.await(t, "ready")
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			p.expect(5)
			p.stdout.await(t, "got "+sig.String())
			assertFree(t, sharedNodes, key)
		})
	}
}

func TestRunSignalWhileWaiting(t *testing.T) {
	t.Parallel()
	key := t.Name()
	holder := start(t, sharedEnv(), "run", key, "--", "sh", "-c", holdScript)
	holder.stdout.await(t, "ready")

	waiter := start(t, sharedEnv(), "run", "--wait", "20s", "--verbose", key, "--", "echo", "ran")
	waiter.stderr.await(t, "waiting")
	if err := waiter.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waiter.expect(128 + int(syscall.SIGINT))
	waiter.stderr.await(t, "did not run")
	if s := waiter.stdout.String(); s != "" {
		t.Errorf("the command ran: %q", s)
	}
	holder.release()
	holder.expect(0)
}

func TestRunLostLockStopsCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		stderr string
	}{
		// sleep dies of the SIGTERM.
		{"SIGTERM", `echo ready; exec sleep 60`, "sending SIGTERM"},
		// sleep ignores SIGTERM, so it takes the SIGKILL after --grace.
		{"SIGKILL after grace", `trap '' TERM; echo ready; exec sleep 60`, "sending SIGKILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			servers := redistest.StartT(t, 3, redistest.Options{})
			// A short TTL so that the loss is found within a second of
			// the majority going away; the node timeout stays below
			// it, and --wait retries a first dial slower than that on a
			// loaded machine.
			p := start(t, nil, "run", "--nodes", nodesURL(servers), "--ttl", "1s", "--node-timeout", "300ms", "--wait", "20s",
				"--grace", "200ms", t.Name(), "--", "sh", "-c", tt.script)
			p.stdout.await(t, "ready")
			p.loseLock(servers, "lost while the command ran")
			p.stderr.await(t, tt.stderr)
		})
	}
}

func TestRunForceReleaseStopsHolder(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)
	key := t.Name()
	// --wait retries a first dial slower than the node timeout. A TTL of
	// 3s and a node timeout of 1s: the extensions before the force-release
	// go through on a busy machine (with 1s and 300ms they failed there,
	// and the lock was lost for want of a majority instead).
	p := start(t, env, "run", "--ttl", "3s", "--node-timeout", "1s", "--wait", "20s", key, "--", "sh", "-c", `echo ready; exec sleep 60`)
	p.stdout.await(t, "ready")
	// Force the lock away and take it: the next extension finds the lock
	// gone, or held by the new owner.
	if code, _, stderr := redlockRun(t, env, "release", "--force", "--yes", key); code != 0 {
		t.Fatalf("release: %d\n%s", code, stderr)
	}
	thief := start(t, env, "run", key, "--", "sh", "-c", holdScript)
	thief.stdout.await(t, "ready")
	p.expect(exitLost)
	p.stderr.await(t, "lost while the command ran")
	// Another process forced it: the holder says so, not "expired".
	p.stderr.await(t, "force-released")
	thief.release()
	thief.expect(0)
}

func TestRunCooldown(t *testing.T) {
	t.Parallel()
	key := t.Name()
	code, _, stderr := redlockRun(t, sharedEnv(), "run", "--cooldown", "20s", key, "--", "true")
	if code != 0 {
		t.Fatalf("exit code %d\n%s", code, stderr)
	}
	if d := pttl(t, sharedNodes[0], key); d <= 0 || d > 20*time.Second {
		t.Errorf("key's TTL after a 20s cooldown is %v", d)
	}
	code, stdout, _ := redlockRun(t, sharedEnv(), "run", key, "--", "echo", "ran")
	if code != exitBusy || stdout != "" {
		t.Errorf("run during the cooldown: code %d, stdout %q; want %d and no run", code, stdout, exitBusy)
	}
}

func TestRunEnvironment(t *testing.T) {
	t.Parallel()
	key := t.Name()
	// An outer REDLOCK_FENCE must not leak through a run without fencing.
	env := append(sharedEnv(), envFence+"=99")
	code, stdout, stderr := redlockRun(t, env, "run", key, "--", "sh", "-c", `echo "fence=${REDLOCK_FENCE-unset}"`)
	if code != 0 || stdout != "fence=unset" {
		t.Errorf("without --fencing: code %d, stdout %q, want fence=unset\n%s", code, stdout, stderr)
	}

	var fences []uint64
	for range 2 {
		code, stdout, stderr := redlockRun(t, env, "run", "--fencing", key, "--", "sh", "-c", `echo "$REDLOCK_FENCE"`)
		if code != 0 {
			t.Fatalf("exit code %d\n%s", code, stderr)
		}
		f, err := strconv.ParseUint(stdout, 10, 64)
		if err != nil || f == 0 {
			t.Fatalf("REDLOCK_FENCE=%q, want a positive number", stdout)
		}
		fences = append(fences, f)
	}
	if fences[1] <= fences[0] {
		t.Errorf("fencing tokens %v do not grow", fences)
	}
}

func TestRunMetadata(t *testing.T) {
	t.Parallel()
	key := t.Name()
	p := start(t, sharedEnv(), "run", "--metadata", "job=report", key, "--", "sh", "-c", holdScript)
	p.stdout.await(t, "ready")
	for i, v := range keyOnAll(t, sharedNodes, key) {
		if !strings.HasSuffix(v, "\x00job=report") {
			t.Errorf("node %d holds %q, want the metadata at the end", i, v)
		}
	}
	p.release()
	p.expect(0)

	// The default names the host and redlock's pid.
	p = start(t, sharedEnv(), "run", key, "--", "sh", "-c", holdScript)
	p.stdout.await(t, "ready")
	want := "pid=" + strconv.Itoa(p.cmd.Process.Pid)
	if v := keyOnAll(t, sharedNodes, key)[0]; !strings.Contains(v, "host=") || !strings.HasSuffix(v, want) {
		t.Errorf("default metadata in %q, want host= and %s", v, want)
	}
	p.release()
	p.expect(0)
}

// With every node paused, the command gets its SIGTERM before the lock's
// validity ends: at the latest --node-timeout (plus a margin) before it,
// not when the extension in flight gives up.
func TestRunLostLockWarnsBeforeValidityEnds(t *testing.T) {
	t.Parallel()
	const (
		// A TTL long enough that the nodes are paused long before the
		// first extension (due after a third of it), and the command,
		// however slow to start, is ready before its SIGTERM.
		ttl         = 3 * time.Second
		nodeTimeout = 300 * time.Millisecond
		// slack absorbs timers and signal delivery running late on a
		// loaded machine; the SIGTERM is due 150ms (the margin, a
		// twentieth of the TTL) earlier still.
		slack = 150 * time.Millisecond
	)
	servers := redistest.StartT(t, 3, redistest.Options{})
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Resume()
		}
	})
	argv, env := helperCommand(t, "signal-at")
	p := start(t, env, append([]string{"run", "--nodes", nodesURL(servers), "--ttl", ttl.String(), "--node-timeout", nodeTimeout.String(),
		"--wait", "20s", "--grace", "20s", "--verbose", t.Name(), "--"}, argv...)...)
	// The obtained line gives the lock's validity deadline; no extension
	// moves it once the nodes are paused.
	obtained := p.stderr.await(t, "valid until ")
	for _, s := range servers {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	paused := time.Now()
	until, err := time.Parse(time.RFC3339Nano, strings.TrimSuffix(obtained[strings.Index(obtained, "valid until ")+len("valid until "):], ")"))
	if err != nil {
		t.Fatalf("no deadline in %q: %v", obtained, err)
	}
	if firstExtension := until.Add(-2 * ttl / 3); !paused.Before(firstExtension) {
		t.Fatalf("the nodes were paused %v after the first extension was due: the machine is too slow for this test", paused.Sub(firstExtension))
	}
	p.stdout.await(t, "ready")
	line := p.stdout.await(t, "got terminated at ")
	p.expect(exitLost)
	p.stderr.await(t, "lost while the command ran")

	ns, err := strconv.ParseInt(line[strings.LastIndex(line, " ")+1:], 10, 64)
	if err != nil {
		t.Fatalf("no time in %q: %v", line, err)
	}
	termAt := time.Unix(0, ns)
	if !termAt.Before(until) {
		t.Fatalf("SIGTERM came %v after the lock's validity ended", termAt.Sub(until))
	}
	if limit := until.Add(-nodeTimeout + slack); !termAt.Before(limit) {
		t.Fatalf("SIGTERM came %v before the lock's validity ended, want at least %v (node timeout %v, slack %v)", until.Sub(termAt), nodeTimeout-slack, nodeTimeout, slack)
	}
	t.Logf("SIGTERM %v before the validity ended", until.Sub(termAt))
}
