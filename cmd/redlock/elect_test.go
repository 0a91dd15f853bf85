package main

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// termScript prints the leader's term, then holds the leadership until the
// test closes the command's standard input.
const termScript = `echo term=$REDLOCK_TERM; read x; echo done`

// termOf reads the term from a "term=N" line.
func termOf(t *testing.T, line string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimPrefix(line, "term="), 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("no term in %q", line)
	}
	return n
}

// awaitN waits for n lines that contain want and returns them.
func (l *lines) awaitN(t *testing.T, want string, n int) []string {
	t.Helper()
	timeout := time.NewTimer(waitLimit)
	defer timeout.Stop()
	for {
		var found []string
		l.mu.Lock()
		for _, line := range l.all {
			if strings.Contains(line, want) {
				found = append(found, line)
			}
		}
		eof, added := l.eof, l.added
		l.mu.Unlock()
		if len(found) >= n {
			return found[:n]
		}
		if eof {
			t.Fatalf("output ended with %d lines containing %q, want %d:\n%s", len(found), want, n, l)
		}
		select {
		case <-added:
		case <-timeout.C:
			t.Fatalf("%d lines containing %q after %v, want %d:\n%s", len(found), want, waitLimit, n, l)
		}
	}
}

// campaigning waits until p listens for the release of name on every
// server: it campaigns, and waits for the leader to go.
func campaigning(t *testing.T, servers []*redistest.Server, name string, p *proc) {
	t.Helper()
	for _, srv := range servers {
		c := srv.NewClient()
		for {
			n, err := c.PubSubNumSub(t.Context(), "redlock:released:"+name).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n["redlock:released:"+name] > 0 {
				break
			}
			select {
			case <-p.done:
				t.Fatalf("the campaigner exited: %d\n%s", p.code, p.stderr)
			case <-time.After(10 * time.Millisecond):
			}
		}
		_ = c.Close()
	}
}

// Two campaigners: the second runs its command only once the first's has
// ended, with a higher term; leader shows each in turn, then nobody.
func TestElectOneLeaderAtATime(t *testing.T) {
	t.Parallel()
	env, name := sharedEnv(), t.Name()
	a := start(t, env, "elect", "--metadata", "first", name, "--", "sh", "-c", termScript)
	first := termOf(t, a.stdout.await(t, "term="))
	code, out, stderr := redlockRun(t, env, "leader", name)
	if code != 0 || !strings.Contains(out, `led by "first", term `+strconv.FormatUint(first, 10)) {
		t.Fatalf("leader: %d %q %q", code, out, stderr)
	}
	b := start(t, env, "elect", "--metadata", "second", name, "--", "sh", "-c", termScript)
	// Once b campaigns (it listens for a's release on every node), it
	// must not lead while a does.
	campaigning(t, sharedNodes, name, b)
	if strings.Contains(b.stdout.String(), "term=") {
		t.Fatalf("the second campaigner leads while the first does: %s", b.stdout)
	}
	a.release()
	a.stdout.await(t, "done")
	a.expect(0)
	second := termOf(t, b.stdout.await(t, "term="))
	if second <= first {
		t.Errorf("second term %d after %d", second, first)
	}
	if code, out, _ := redlockRun(t, env, "leader", name); code != 0 || !strings.Contains(out, `led by "second"`) {
		t.Errorf("leader after the handover: %d %q", code, out)
	}
	b.release()
	b.expect(0)
	if code, out, _ := redlockRun(t, env, "leader", name); code != exitNoLeader || !strings.Contains(out, "no leader") {
		t.Errorf("leader after both resigned: %d %q", code, out)
	}
}

// With --restart, redlock campaigns again after the command exits, each
// time with a higher term, until a signal.
func TestElectRestart(t *testing.T) {
	t.Parallel()
	p := start(t, sharedEnv(), "elect", "--restart", "--restart-delay", "10ms", t.Name(), "--", "sh", "-c", "echo term=$REDLOCK_TERM")
	var last uint64
	for _, line := range p.stdout.awaitN(t, "term=", 3) {
		n := termOf(t, line)
		if n <= last {
			t.Errorf("term %d after %d", n, last)
		}
		last = n
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The signal came while campaigning or waiting (128+15), or was
	// forwarded to a command that ended of it or had just ended (0).
	if code := p.wait(); code != 128+int(syscall.SIGTERM) && code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, p.stderr)
	}
}

// A leader cut off from the majority stops its command before its validity
// ends, and exits with 76.
func TestElectLostLeadershipStopsCommand(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	p := start(t, nil, "elect", "--nodes", nodesURL(servers), "--ttl", "1s", "--node-timeout", "300ms", "--grace", "200ms",
		t.Name(), "--", "sh", "-c", `echo ready; exec sleep 60`)
	p.stdout.await(t, "ready")
	p.loseLock(servers, "lost while the command ran")
}

func TestElectUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"elect", "name"},
		{"elect", "--", "true"},
		{"elect", "name", "--"},
		{"elect", "--restart-delay", "-1s", "name", "--", "true"},
		{"elect", "redlock:x", "--", "true"},
		{"leader"},
		{"leader", "a", "b"},
	} {
		if code, _, stderr := redlockRun(t, sharedEnv(), args...); code != exitUsage {
			t.Errorf("%q: exit code %d, want %d\n%s", args, code, exitUsage, stderr)
		}
	}
}

// A leader whose redlock is killed (no resignation) is replaced within its
// TTL by a campaigner that waited.
func TestElectKilledLeaderReplaced(t *testing.T) {
	t.Parallel()
	env, name := sharedEnv(), t.Name()
	a := start(t, env, "elect", "--ttl", "1s", "--node-timeout", "300ms", name, "--", "sh", "-c", termScript)
	first := termOf(t, a.stdout.await(t, "term="))
	b := start(t, env, "elect", "--ttl", "1s", "--node-timeout", "300ms", name, "--", "sh", "-c", termScript)
	campaigning(t, sharedNodes, name, b)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	a.wait()
	second := termOf(t, b.stdout.await(t, "term="))
	took := time.Since(killed)
	t.Logf("replaced %v after the kill", took)
	if second <= first {
		t.Errorf("term %d after %d", second, first)
	}
	// The TTL, plus a loaded machine's slack for the waiter's wake-up, its
	// round trips and its output reaching the test.
	if took > 3*time.Second {
		t.Errorf("replaced %v after the leader was killed, TTL 1s", took)
	}
	b.release()
	b.expect(0)
}
