package conn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// guardedAcquire is a guarded acquisition of key (scripts.Acquire's
// guarded variant) whose reply goes to got; maxTTL 0 runs it unguarded.
func guardedAcquire(key string, maxTTL int, got chan<- *redis.Cmd) *Call {
	keys := []string{key, "fence:" + key, "guard:marker", "guard:quarantine"}
	prefix := "owner\x00"
	args := []any{prefix + "1\x00", 10000, prefix, "0", maxTTL, 60000, 0}
	s := scripts.Acquire.Guarded(true)
	return &Call{Timeout: time.Second, Script: s, Keys: keys, Cmd: EvalSha(s, keys, args),
		Reply: ReplyFunc(func(cmd *redis.Cmd) { got <- cmd })}
}

// functionWorker is a worker of a pipe that loads the guard's library, to
// one fresh server whose client it returns; both end at cleanup.
func functionWorker(t *testing.T) (*redis.Client, *worker) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	p := NewPipe(c, time.Second, Quiet, nil)
	p.UseFunctions()
	w := &worker{p: p}
	t.Cleanup(func() {
		w.drop()
		p.Close()
	})
	return c, w
}

// calls returns how many calls of cmd the server counted.
func calls(t *testing.T, c *redis.Client, cmd string) int {
	t.Helper()
	stats, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(stats, "cmdstat_"+cmd+":calls=")
	if !ok {
		return 0
	}
	n := 0
	for _, r := range rest {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}

// A run of guarded acquisitions in a batch goes as one call of the
// library's batch function, each answered as on its own: one that raises
// an error does not fail the others. A server that lost the library while
// the connection stayed open answers the batch "Function not found": each
// acquisition goes again as its script, which guards on its own, and the
// library is loaded again.
func TestBatchOfGuardedAcquisitions(t *testing.T) {
	c, w := functionWorker(t)
	ctx := context.Background()
	got := make(chan *redis.Cmd, 3)
	replies := func() []*redis.Cmd {
		return []*redis.Cmd{<-got, <-got, <-got}
	}

	// Unguarded (maxTTL 0), the second key of the wrong type.
	if err := c.HSet(ctx, "b", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	w.exec([]*Call{guardedAcquire("a", 0, got), guardedAcquire("b", 0, got), guardedAcquire("c", 0, got)})
	r := replies()
	if n := calls(t, c, "fcall"); n != 1 || !w.fn {
		t.Fatalf("%d FCALLs for a batch of 3 function calls (library loaded: %v), want 1", n, w.fn)
	}
	for i, want := range []string{"", "WRONGTYPE", ""} {
		if err := r[i].Err(); (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Fatalf("call %d: %v, want %q", i, err, want)
		}
	}
	if v, err := r[0].Int64(); err != nil || v != 0 {
		t.Fatalf("call 0: %v, %v: want granted (0)", v, err)
	}

	// Guarded, on a server without its library or marker: every call
	// abstains, through its script.
	for _, err := range []error{c.FunctionFlush(ctx).Err(), c.FlushAll(ctx).Err(), c.ConfigResetStat(ctx).Err()} {
		if err != nil {
			t.Fatal(err)
		}
	}
	w.exec([]*Call{guardedAcquire("a", 10000, got), guardedAcquire("b", 10000, got), guardedAcquire("c", 10000, got)})
	for i, cmd := range replies() {
		if err := cmd.Err(); err == nil || !strings.HasPrefix(err.Error(), "ABSTAIN") {
			t.Fatalf("call %d: %v, want ABSTAIN", i, err)
		}
	}
	if n := calls(t, c, "eval"); n != 3 {
		t.Fatalf("%d EVALs after the library was lost, want each call sent again as its script", n)
	}
	if n, err := c.Exists(ctx, "a", "b", "c").Result(); err != nil || n != 0 {
		t.Fatalf("%d keys granted by a node that lost its memory (%v)", n, err)
	}
	if libs, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result(); err != nil || len(libs) != 1 || !w.fn {
		t.Fatalf("libraries %v (%v), loaded: %v: want the library loaded again", libs, err, w.fn)
	}
}

// Guarded acquisitions sent together move up to the first of them, past
// the calls between, but never past a call on one of their keys: a
// release of key b, then an acquisition of b, reach the node in that order.
func TestBatchKeepsOrderOfEachKey(t *testing.T) {
	c, w := functionWorker(t)
	ctx := context.Background()
	got := make(chan *redis.Cmd, 3)
	release := func(key string) *Call {
		keys := []string{key}
		return &Call{Timeout: time.Second, Script: scripts.Release, Keys: keys,
			Cmd: EvalSha(scripts.Release, keys, []any{"other\x00", "", 0, "1"}), Reply: ReplyFunc(func(cmd *redis.Cmd) { got <- cmd })}
	}
	for _, tc := range []struct {
		released string
		fcalls   int
	}{
		{"x", 1}, // not a key of theirs: the acquisitions go as one batch
		{"b", 2}, // the acquisition of b waits for the release of b
	} {
		for _, err := range []error{c.FlushAll(ctx).Err(), c.ConfigResetStat(ctx).Err(),
			c.Set(ctx, tc.released, "other\x001\x00", time.Minute).Err()} {
			if err != nil {
				t.Fatal(err)
			}
		}
		w.exec([]*Call{guardedAcquire("a", 0, got), release(tc.released), guardedAcquire("b", 0, got)})
		r := []*redis.Cmd{<-got, <-got, <-got}
		if v, err := r[2].Int64(); err != nil || v != 0 {
			t.Fatalf("%s released between: the acquisition of b answered %v, %v, want granted (0)", tc.released, v, err)
		}
		if n := calls(t, c, "fcall"); n != tc.fcalls {
			t.Fatalf("%s released between: %d FCALLs, want %d", tc.released, n, tc.fcalls)
		}
	}
}
