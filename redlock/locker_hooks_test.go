package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// scriptNames names the scripts a lock's life runs, by the SHA its
// EVALSHA lines carry.
var scriptNames = map[any]string{
	scripts.Acquire.SHA:    "acquire",
	scripts.Release.SHA:    "release",
	scripts.Extend.SHA:     "extend",
	scripts.ExtendMany.SHA: "extend_many",
}

// countingHook is a go-redis hook as a metrics hook would be: it counts
// the scripts it sees go through ProcessHook and ProcessPipelineHook, and
// calls next.
type countingHook struct {
	mu   sync.Mutex
	seen map[string]int // "process acquire", "pipeline release", ...
	// onScript, if set, gets each script's name.
	onScript func(name string)
}

func (h *countingHook) note(via string, cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 || args[0] != "evalsha" {
		return
	}
	name, ok := scriptNames[args[1]]
	if !ok {
		return
	}
	h.mu.Lock()
	h.seen[via+" "+name]++
	f := h.onScript
	h.mu.Unlock()
	if f != nil {
		f(name)
	}
}

// take returns how many times each script was seen, by either path, since
// the last take.
func (h *countingHook) take() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := make(map[string]int)
	for k, v := range h.seen {
		n[k] += v
	}
	h.seen = make(map[string]int)
	return n
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note("process", cmd)
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.note("pipeline", cmd)
		}
		return next(ctx, cmds)
	}
}

// either is the count of a script seen through ProcessHook or
// ProcessPipelineHook.
func either(seen map[string]int, name string) int {
	return seen["process "+name] + seen["pipeline "+name]
}

// TestCallerHooksSeeEveryCall checks that the go-redis hooks of the
// clients given to New see the scripts of Obtain, Release, Extend and a
// KeepAlive round on every node, though the lock sends them on connections
// of its own.
func TestCallerHooksSeeEveryCall(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{})
	clients := redistest.ClientsT(t, servers)
	hooks := make([]*countingHook, len(clients))
	for i, c := range clients {
		hooks[i] = &countingHook{seen: make(map[string]int)}
		c.AddHook(hooks[i])
	}
	l, err := redlock.New(clients, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx := t.Context()
	// Every node gets every call of a round, the late ones in the
	// background: wait for each hook to have seen the script.
	awaitAll := func(step, name string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for i, h := range hooks {
			for {
				seen := h.take()
				if either(seen, name) > 0 {
					break
				}
				select {
				case <-deadline:
					t.Fatalf("%s: node %d's hook saw no %s script", step, i, name)
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
	}
	lock, err := l.TryObtain(ctx, "hooked", redlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	awaitAll("Obtain", "acquire")
	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	awaitAll("Extend", "extend")

	// A KeepAlive round: each hook tells of the extension it sees.
	rounds := make(chan int, 3*len(hooks))
	for i, h := range hooks {
		h.mu.Lock()
		h.onScript = func(name string) {
			if name == "extend" || name == "extend_many" {
				select {
				case rounds <- i:
				default:
				}
			}
		}
		h.mu.Unlock()
	}
	kept, err := l.TryObtain(ctx, "kept", redlock.WithTTL(2*time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	held, stop := kept.KeepAlive(ctx)
	got := make(map[int]bool)
	for len(got) < len(hooks) {
		select {
		case i := <-rounds:
			got[i] = true
		case <-held.Done():
			t.Fatalf("KeepAlive: lock lost before every hook saw a round: %v", context.Cause(held))
		case <-time.After(10 * time.Second):
			t.Fatalf("KeepAlive: hooks of nodes %v saw a round, want all %d", got, len(hooks))
		}
	}
	stop()
	for _, h := range hooks {
		h.mu.Lock()
		h.onScript = nil
		h.mu.Unlock()
	}
	if err := kept.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, h := range hooks {
		h.take()
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	awaitAll("Release", "release")
}

// TestCallerHooksSeePipelines checks that a batch of calls that a node's
// worker sends together reaches the caller's hooks as one pipeline: many
// locks taken at once on one node.
func TestCallerHooksSeePipelines(t *testing.T) {
	servers := redistest.StartT(t, 1, redistest.Options{})
	clients := redistest.ClientsT(t, servers)
	h := &countingHook{seen: make(map[string]int)}
	clients[0].AddHook(h)
	l, err := redlock.New(clients, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx := t.Context()
	// Rounds of 64 concurrent acquisitions until some went out together;
	// each acquisition is counted once whichever way it went.
	for try := 0; ; try++ {
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 64 {
			wg.Go(func() {
				lock, err := l.TryObtain(ctx, fmt.Sprintf("p%d-%d", try, i))
				if err != nil {
					errs <- err
					return
				}
				errs <- lock.Release(ctx)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		seen := h.take()
		if n := either(seen, "acquire"); n != 64 {
			t.Fatalf("hook saw %d acquisitions of 64 (%v)", n, seen)
		}
		if seen["pipeline acquire"] > 0 {
			break
		}
		if try == 20 {
			t.Fatalf("no acquisition went out in a pipeline in %d tries (%v)", try+1, seen)
		}
	}
}
