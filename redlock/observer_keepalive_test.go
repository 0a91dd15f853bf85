package redlock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

// workKey marks the context given to KeepAlive with the lock's key, so that
// a test can check that an extension's events carry its work's values.
type workKey struct{}

// workRecorder is a recorder that also notes the OpExtend events whose
// context does not carry their own lock's work values.
type workRecorder struct {
	*recorder
	mu    sync.Mutex
	wrong []string
}

func (r *workRecorder) check(ctx context.Context, op redlock.Op, key string) {
	if op != redlock.OpExtend || ctx.Value(workKey{}) == key {
		return
	}
	r.mu.Lock()
	r.wrong = append(r.wrong, fmt.Sprintf("%s %s in the context of %v", op, key, ctx.Value(workKey{})))
	r.mu.Unlock()
}

func (r *workRecorder) OpStart(ctx context.Context, op redlock.Op, key string) context.Context {
	r.check(ctx, op, key)
	return r.recorder.OpStart(ctx, op, key)
}

func (r *workRecorder) OpDone(ctx context.Context, e redlock.OpEvent) {
	r.check(ctx, e.Op, e.Key)
	r.recorder.OpDone(ctx, e)
}

func (r *workRecorder) NodeDone(ctx context.Context, e redlock.NodeEvent) {
	r.check(ctx, e.Op, e.Key)
	r.recorder.NodeDone(ctx, e)
}

// funcClock is a clock whose type cannot be compared.
type funcClock struct{ now func() time.Time }

func (c funcClock) Now() time.Time                  { return c.now() }
func (c funcClock) Since(t time.Time) time.Duration { return c.now().Sub(t) }

// extendCalls counts, on one node's slow log, the calls of extend.lua and of
// extend_many.lua, and the keys the latter carried.
func extendCalls(t *testing.T, c redis.UniversalClient) (single, many, manyKeys int) {
	t.Helper()
	entries, err := c.SlowLogGet(t.Context(), -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if len(e.Args) < 3 || e.Args[0] != "evalsha" {
			continue
		}
		switch e.Args[1] {
		case redlock.ScriptSHA("extend.lua"):
			single++
		case redlock.ScriptSHA("extend_many.lua"):
			n, err := strconv.Atoi(e.Args[2])
			if err != nil {
				t.Fatalf("extend_many.lua call with %q keys", e.Args[2])
			}
			many++
			manyKeys += n
		}
	}
	return single, many, manyKeys
}

// KeepAlive extends locks in shared rounds, one extend_many.lua call per
// node for many locks, whatever the Locker is given: an Observer, which
// sees each lock's extension as its own Extend (OpStart and OpDone, and
// every node's answer, in the context of the lock's work), or a clock of a
// type that cannot be compared.
func TestKeepAliveSharesRoundsWithObserver(t *testing.T) {
	const n = 16
	for _, tc := range []struct {
		name string
		opts []redlock.Option
	}{
		{"observer", nil},
		{"clock not comparable", []redlock.Option{redlock.WithClock(funcClock{time.Now})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newLoggedCluster(t, 3)
			rec := &workRecorder{recorder: newRecorder()}
			// Extensions due within a thirty-second of the TTL share a
			// round: 190ms, for the acquisitions to fit in on a loaded
			// machine.
			opts := append([]redlock.Option{redlock.WithObserver(rec), redlock.WithTTL(6 * time.Second), redlock.WithNodeTimeout(300 * time.Millisecond)}, tc.opts...)
			l := c.locker(t, opts...)
			keys := make([]string, n)
			stops := make([]func(), n)
			for i := range keys {
				keys[i] = fmt.Sprintf("obs:batch:%d", i)
				lock := mustObtain(t, l, keys[i])
				_, stop := lock.KeepAlive(context.WithValue(t.Context(), workKey{}, keys[i]))
				stops[i] = stop
				t.Cleanup(func() { _ = lock.Release(context.Background()) })
			}
			// Each lock's extension is seen: its OpDone, a success, and
			// every node's answer in that operation's context.
			rec.await(t, "every lock's extension with every node's answer", func(r *recorder) bool {
				ok := map[any]string{} // the opID of each successful extension
				for i, e := range r.ops {
					if e.Op == redlock.OpExtend && e.Err == nil {
						ok[r.opCtx[i]] = e.Key
					}
				}
				answers := map[any]int{}
				for i, e := range r.nodes {
					if key, found := ok[r.nodeCtx[i]]; found && e.Op == redlock.OpExtend && e.Key == key && e.Outcome == redlock.OutcomeOK && e.Latency > 0 {
						answers[r.nodeCtx[i]]++
					}
				}
				done := map[string]bool{}
				for id, key := range ok {
					if answers[id] == len(c.clients) {
						done[key] = true
					}
				}
				return len(done) == n
			})
			for _, stop := range stops {
				stop() // waits for the rounds in flight
			}
			rec.mu.Lock()
			if len(rec.wrong) > 0 {
				t.Errorf("events outside their work's context: %v", rec.wrong)
			}
			rec.mu.Unlock()
			// The extensions went out together: on every node, no single
			// extend.lua, and extend_many.lua calls that carried every lock,
			// at least two keys a call on average (over every round run
			// until now, should the wait have let more than one pass).
			for i, cl := range c.clients {
				single, many, manyKeys := extendCalls(t, cl)
				t.Logf("node %d: %d extend.lua calls, %d extend_many.lua calls with %d keys", i, single, many, manyKeys)
				if single > 0 || manyKeys < n || 2*many > manyKeys {
					t.Errorf("node %d ran %d extend.lua calls and %d extend_many.lua calls with %d keys, want none, and at least %d keys, two a call",
						i, single, many, manyKeys, n)
				}
			}
		})
	}
}
