package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// inspect --slots shows a semaphore's permits, --shared a read-write lock's
// readers and writer, as run --slots and run --shared take them.
func TestInspectSlotsAndShared(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)

	var holders []*proc
	for range 2 {
		p := start(t, env, "run", "--slots", "3", "--metadata", "job=permit", "deploys", "--", "sh", "-c", holdScript)
		p.stdout.await(t, "ready")
		holders = append(holders, p)
	}
	code, stdout, stderr := redlockRun(t, env, "inspect", "--slots", "3", "deploys")
	if code != 0 || !strings.Contains(stdout, `semaphore "deploys" of 3: 2 held on a majority`) || strings.Count(stdout, "job=permit") < 4 {
		t.Errorf("inspect --slots 3 with two permits held: code %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = redlockRun(t, env, "inspect", "--slots", "3", "--json", "deploys")
	var many manyJSON
	if err := json.Unmarshal([]byte(stdout), &many); code != 0 || err != nil || many.Size != 3 || len(many.Permits) != 2 || many.Permits[0].Holder == "" {
		t.Errorf("inspect --slots 3 --json: code %d, %v, %+v\n%s", code, err, many, stderr)
	}

	for range 2 {
		p := start(t, env, "run", "--shared", "--metadata", "job=reader", "shard", "--", "sh", "-c", holdScript)
		p.stdout.await(t, "ready")
		holders = append(holders, p)
	}
	code, stdout, stderr = redlockRun(t, env, "inspect", "--shared", "shard")
	if code != 0 || !strings.Contains(stdout, `read-write lock "shard": no writer, 2 readers`) || strings.Count(stdout, "job=reader") < 4 {
		t.Errorf("inspect --shared with two readers: code %d\n%s\n%s", code, stdout, stderr)
	}
	for _, p := range holders {
		p.release()
		p.expect(0)
	}

	writer := start(t, env, "run", "shard", "--", "sh", "-c", holdScript)
	writer.stdout.await(t, "ready")
	code, stdout, stderr = redlockRun(t, env, "inspect", "--shared", "--json", "shard")
	many = manyJSON{}
	if err := json.Unmarshal([]byte(stdout), &many); code != 0 || err != nil || many.Writer == nil || many.Writer.Holder == "" || len(many.Readers) != 0 {
		t.Errorf("inspect --shared --json with a writer: code %d, %v, %+v\n%s", code, err, many, stderr)
	}
	writer.release()
	writer.expect(0)

	if code, _, stderr := redlockRun(t, env, "inspect", "--shared", "--slots", "2", "shard"); code != 64 || !strings.Contains(stderr, "exclude each other") {
		t.Errorf("inspect --shared --slots: code %d, %s", code, stderr)
	}
}

// inspect KEY without --slots or --shared of a busy semaphore or of a
// read-write lock held by readers says what KEY is and shows what is held,
// without the library's own key names; a key that is nothing is free.
func TestInspectFindsKind(t *testing.T) {
	t.Parallel()
	env := nodesEnv(redistest.StartT(t, 3, redistest.Options{}))
	permit := start(t, env, "run", "--slots", "3", "--metadata", "job=permit", "pool", "--", "sh", "-c", holdScript)
	permit.stdout.await(t, "ready")
	reader := start(t, env, "run", "--shared", "--metadata", "job=reader", "shard", "--", "sh", "-c", holdScript)
	reader.stdout.await(t, "ready")

	for _, tt := range []struct {
		key  string
		want []string
	}{
		{"pool", []string{`semaphore "pool": 1 permit held on some node (inspect --slots N shows it with its size N)`, "permit ", "job=permit"}},
		{"shard", []string{`read-write lock "shard": no writer, 1 readers`, "writer: not held", "reader ", "job=reader"}},
		{"nothing", []string{`lock "nothing": not held by any owner on a majority`}},
	} {
		code, stdout, stderr := redlockRun(t, env, "inspect", tt.key)
		if code != 0 {
			t.Errorf("inspect %s: code %d\n%s", tt.key, code, stderr)
		}
		for _, want := range tt.want {
			if !strings.Contains(stdout, want) {
				t.Errorf("inspect %s does not say %q:\n%s", tt.key, want, stdout)
			}
		}
		if strings.Contains(stdout, "redlock:") {
			t.Errorf("inspect %s shows the library's own key names:\n%s", tt.key, stdout)
		}
	}
	for _, p := range []*proc{permit, reader} {
		p.release()
		p.expect(0)
	}
}
