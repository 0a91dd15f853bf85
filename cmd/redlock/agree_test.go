package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
)

// elect takes what run takes: bare seconds, -w and -n with run's meaning
// (0 tries once), and keeps REDLOCK_NODES from its command unless
// --pass-nodes; doctor takes bare seconds too.
func TestElectAgreesWithRun(t *testing.T) {
	t.Parallel()
	env, name := sharedEnv(), t.Name()
	show := []string{"sh", "-c", `echo "nodes=${REDLOCK_NODES-unset}"`}
	code, stdout, stderr := redlockRun(t, env, append([]string{"elect", "--ttl", "3", "--node-timeout", "0.5", "--wait", "5", name, "--"}, show...)...)
	if code != 0 || stdout != "nodes=unset" {
		t.Errorf("elect with bare seconds: code %d, stdout %q, want 0 and nodes=unset\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = redlockRun(t, env, append([]string{"elect", "--pass-nodes", name, "--"}, show...)...)
	if want := "nodes=" + nodesURL(sharedNodes); code != 0 || stdout != want {
		t.Errorf("elect --pass-nodes: code %d, stdout %q, want %q\n%s", code, stdout, want, stderr)
	}

	leader := start(t, env, "elect", name, "--", "sh", "-c", termScript)
	leader.stdout.await(t, "term=")
	for _, args := range [][]string{{"-w", "0"}, {"--wait", "0"}, {"-n"}, {"-w", "0.2"}} {
		code, stdout, stderr := redlockRun(t, env, append(append([]string{"elect"}, args...), name, "--", "echo", "ran")...)
		if code != exitBusy || stdout != "" || !strings.Contains(stderr, "busy") {
			t.Errorf("elect %s while another leads: code %d, stdout %q; want %d and no run\n%s", strings.Join(args, " "), code, stdout, exitBusy, stderr)
		}
	}
	waiter := start(t, env, "elect", "-w", "forever", name, "--", "echo", "ran")
	campaigning(t, sharedNodes, name, waiter)
	leader.release()
	leader.expect(0)
	waiter.expect(0)
	if got := waiter.stdout.String(); got != "ran" {
		t.Errorf("elect -w forever: stdout %q, want ran", got)
	}

	code, stdout, stderr = redlockRun(t, env, "doctor", "--ttl", "30", "--clock-window", "0", "--restart-guard", "0")
	if code == exitUsage || strings.Contains(stderr, "invalid value") {
		t.Errorf("doctor with bare seconds: code %d\n%s\n%s", code, stdout, stderr)
	}
}

// leader --json prints one object; --watch prints every change of leader
// until a signal.
func TestLeaderJSONAndWatch(t *testing.T) {
	t.Parallel()
	env, name := sharedEnv(), t.Name()
	decode := func(line string) leaderJSON {
		t.Helper()
		var v leaderJSON
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		return v
	}
	code, stdout, stderr := redlockRun(t, env, "leader", "--json", name)
	if v := decode(stdout); code != exitNoLeader || v.Leading || v.Name != name {
		t.Errorf("leader --json with nobody leading: code %d, %+v\n%s", code, v, stderr)
	}

	watch := start(t, env, "leader", "--watch", "--json", name)
	watch.stdout.await(t, `"leading":false`)
	a := start(t, env, "elect", "--metadata", "first", name, "--", "sh", "-c", termScript)
	term := termOf(t, a.stdout.await(t, "term="))
	if v := decode(watch.stdout.await(t, `"metadata":"first"`)); !v.Leading || v.Term != term || v.TTLMs <= 0 {
		t.Errorf("leader --watch --json: %+v, want leading with term %d", v, term)
	}
	code, stdout, stderr = redlockRun(t, env, "leader", "--json", name)
	if v := decode(stdout); code != 0 || !v.Leading || v.Metadata != "first" || v.Term != term {
		t.Errorf("leader --json: code %d, %+v\n%s", code, v, stderr)
	}
	a.release()
	a.expect(0)
	watch.stdout.awaitN(t, `"leading":false`, 2)
	if err := watch.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	watch.expect(0)
}
