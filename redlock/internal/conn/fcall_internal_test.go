package conn

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// guardedAcquire is a guarded acquisition of key (scripts.Acquire's
// guarded variant) whose reply goes to got; maxTTL 0 runs it unguarded.
func guardedAcquire(key string, maxTTL int, got chan<- *redis.Cmd) *Call {
	keys := []string{key, "fence:" + key, scripts.GuardMarker, scripts.GuardQuarantine}
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

// Guarded acquisitions in one batch each go as an FCALL of their function,
// each answered on its own: one that raises an error does not fail the
// others. A server that lost the library while the connection stayed open
// answers "Function not found": each acquisition goes again as its
// script, which guards on its own, and the library is loaded again.
func TestPipelinedGuardedAcquisitions(t *testing.T) {
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
	if n := calls(t, c, "fcall"); n != 3 || !w.fn {
		t.Fatalf("%d FCALLs for a batch of 3 function calls (library loaded: %v), want 3", n, w.fn)
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

// A guarded call's FCALL line is its EVALSHA line with FCALL and its
// function in front, or for an acquisition that is not fenced the lean
// form (the lock key; the value, TTL, prefix and maximum TTL); EvalSha
// builds it once, beyond the EVALSHA line, and a call whose line was built
// otherwise gets the same line built then.
func TestFCALLLine(t *testing.T) {
	got := make(chan *redis.Cmd)
	w := &worker{fn: true}

	c := guardedAcquire("k", 10000, got)
	args := c.Cmd[3+4:]
	fc := w.line(c)
	name, _ := fc[1].(string)
	if len(fc) != 8 || fc[0] != "fcall" || !strings.HasSuffix(name, "_acquire_lean") || fc[2] != 1 || fc[3] != "k" ||
		!slices.Equal(fc[4:], []any{args[0], args[1], args[2], args[4]}) {
		t.Fatalf("FCALL line of an acquisition that is not fenced: %v, want the lean form", fc)
	}
	if &fc[0] != &c.Cmd[:cap(c.Cmd)][len(c.Cmd)] {
		t.Errorf("the FCALL line is not the one EvalSha built")
	}
	if c.Cmd[0] != "evalsha" || len(c.Cmd) != 3+4+7 {
		t.Errorf("the EVALSHA line became %v", c.Cmd)
	}
	lean := slices.Clone(fc)
	c.Cmd = slices.Clip(slices.Clone(c.Cmd))
	if fc := w.line(c); !slices.Equal(fc, lean) {
		t.Fatalf("FCALL line of a line without room %v, want %v", fc, lean)
	}

	// The guard's keys of a cluster (in the lock's slot): the full form,
	// which sends them.
	clustered := slices.Clone(c.Keys)
	clustered[2], clustered[3] = wire.Clustered.GuardMarker("k"), wire.Clustered.GuardQuarantine("k")
	cc := EvalSha(c.Script, clustered, c.Cmd[3+4:])
	if fc := w.line(&Call{Script: c.Script, Keys: clustered, Cmd: cc}); !slices.Equal(fc, append([]any{"fcall", c.Script.Fn}, cc[2:]...)) {
		t.Fatalf("FCALL line of an acquisition with a cluster's guard keys: %v, want the full form", fc)
	}

	// Fenced: the full form.
	fenced := slices.Clone(c.Cmd)
	fenced[3+4+3] = "1"
	c.Cmd = EvalSha(c.Script, c.Keys, fenced[3+4:])
	want := append([]any{"fcall", c.Script.Fn}, c.Cmd[2:]...)
	if fc := w.line(c); !slices.Equal(fc, want) {
		t.Fatalf("FCALL line of a fenced acquisition %v, want %v", fc, want)
	}
	c.Cmd = slices.Clip(slices.Clone(c.Cmd))
	if fc := w.line(c); !slices.Equal(fc, want) {
		t.Fatalf("FCALL line of a line without room %v, want %v", fc, want)
	}
	plain := EvalSha(scripts.Acquire, []string{"k"}, []any{"v", 1, "p"})
	if cap(plain) != len(plain) {
		t.Errorf("EvalSha of a script without a function: capacity %d for %d", cap(plain), len(plain))
	}
}
