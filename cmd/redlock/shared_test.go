package main

import (
	"strings"
	"testing"
)

// run --shared takes a reader's share: readers run side by side, and a
// plain run of the key (the writer) waits for them; the writer keeps
// readers out while it runs.
func TestRunShared(t *testing.T) {
	t.Parallel()
	key := t.Name()
	r1 := start(t, sharedEnv(), "run", "--shared", key, "--", "sh", "-c", holdScript)
	r1.stdout.await(t, "ready")
	r2 := start(t, sharedEnv(), "run", "-s", key, "--", "sh", "-c", holdScript)
	r2.stdout.await(t, "ready")
	if code, stdout, stderr := redlockRun(t, sharedEnv(), "run", "-n", key, "--", "echo", "ran"); code != exitBusy || stdout != "" {
		t.Errorf("a plain run beside two readers: code %d, stdout %q; want %d and no run\n%s", code, stdout, exitBusy, stderr)
	}
	r1.release()
	r1.expect(0)
	r2.release()
	r2.expect(0)

	writer := start(t, sharedEnv(), "run", key, "--", "sh", "-c", holdScript)
	writer.stdout.await(t, "ready")
	if code, stdout, stderr := redlockRun(t, sharedEnv(), "run", "--shared", "-n", key, "--", "echo", "ran"); code != exitBusy || stdout != "" {
		t.Errorf("a reader beside the writer: code %d, stdout %q; want %d and no run\n%s", code, stdout, exitBusy, stderr)
	}
	writer.release()
	writer.expect(0)
}

// run --slots N takes one of N permits: N run at once, the next is busy.
func TestRunSlots(t *testing.T) {
	t.Parallel()
	key := t.Name()
	var holders []*proc
	for range 2 {
		p := start(t, sharedEnv(), "run", "--slots", "2", key, "--", "sh", "-c", holdScript)
		p.stdout.await(t, "ready")
		holders = append(holders, p)
	}
	if code, stdout, stderr := redlockRun(t, sharedEnv(), "run", "--slots", "2", "-n", key, "--", "echo", "ran"); code != exitBusy || stdout != "" {
		t.Errorf("a third permit of two: code %d, stdout %q; want %d and no run\n%s", code, stdout, exitBusy, stderr)
	}
	if code, _, stderr := redlockRun(t, sharedEnv(), "run", "--slots", "3", "-n", key, "--", "echo", "ran"); code != exitSize || !strings.Contains(stderr, "the semaphore has 2 permits on the nodes, not 3 (--slots)") {
		t.Errorf("--slots 3 of a semaphore of 2: code %d; want %d naming the sizes\n%s", code, exitSize, stderr)
	}
	for _, p := range holders {
		p.release()
		p.expect(0)
	}
	for _, args := range [][]string{{"--slots", "-1"}, {"--slots", "1001"}, {"--slots", "2", "--shared"}} {
		a := append(append([]string{"run"}, args...), key, "--", "true")
		if code, _, _ := redlockRun(t, sharedEnv(), a...); code != exitUsage {
			t.Errorf("%v: code %d, want %d", args, code, exitUsage)
		}
	}
}
