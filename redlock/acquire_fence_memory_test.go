package redlock_test

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

var (
	fenceKeys    = flag.Int("fencekeys", 2000, "TestFenceCountersOfManyKeysExpire: how many distinct keys to lock (try 50000)")
	fenceKeyLife = flag.Duration("fencekeys.life", time.Second, "TestFenceCountersOfManyKeysExpire: the counters' lifetime (WithFenceLifetime)")
)

// Memory follows the locks held, not the keys ever locked: many distinct
// keys locked once each with fencing leave at most a few hundred keys per
// node once the counters' lifetime has passed. It logs the memory that a
// fenced key held costs (INFO memory), and one counter's MEMORY USAGE.
func TestFenceCountersOfManyKeysExpire(t *testing.T) {
	const ttl, workers, maxLeft = 2 * time.Second, 32, 200
	life := *fenceKeyLife
	for _, tt := range []struct {
		name   string
		opts   []redlock.Option
		fenced bool
	}{
		// Plain locks leave nothing: the baseline of the rate and memory.
		{"plain", nil, false},
		{"fencing", nil, true},
		{"fencing and guard", guardOpts, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 3)
			opts := append(slices.Clone(tt.opts), redlock.WithTTL(ttl), redlock.WithShortFenceLifetime(life))
			if tt.fenced {
				opts = append(opts, redlock.WithFencing())
			}
			l := c.locker(t, opts...)
			if len(tt.opts) > 0 {
				if err := l.Bootstrap(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			before := serverInfo(t, c.clients, "memory", "used_memory")
			n := *fenceKeys
			// Every key is queued before the workers start: a worker that
			// fails returns, and the rest drain the queue.
			keys := make(chan string, n)
			for i := range n {
				keys <- fmt.Sprintf("order-%d", i)
			}
			close(keys)
			errs := make(chan error, workers)
			start := time.Now()
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for key := range keys {
						lock, err := l.Obtain(t.Context(), key)
						if err == nil {
							err = lock.Release(t.Context())
						}
						if err != nil {
							errs <- fmt.Errorf("%s: %w", key, err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err := joinErrs(errs); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			after := serverInfo(t, c.clients, "memory", "used_memory")
			sizes := dbSizes(t, c.clients)
			usage, err := c.clients[0].MemoryUsage(t.Context(), "redlock:fence:order-0").Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			t.Logf("%d keys in %v (%.0f a second); keys per node right after: %v; used_memory grew by %.0f B per key locked (mean of the nodes); MEMORY USAGE of the first counter: %d B (0: expired already)",
				n, took.Round(time.Millisecond), float64(n)/took.Seconds(), sizes, perServer(before, after, n), usage)

			// The counters live their lifetime plus the TTL after their last
			// write; the nonces of write-back rounds their node timeout.
			var left []int64
			if !poll(t, life+ttl+30*time.Second, func() bool {
				left = dbSizes(t, c.clients)
				return slices.Max(left) <= maxLeft
			}) {
				t.Fatalf("keys per node %v, %v after the last of %d keys was released, want at most %d (counters living %v)", left, time.Since(start)-took, n, maxLeft, life+ttl)
			}
			t.Logf("keys per node %v, %v after the last release", left, (time.Since(start) - took).Round(time.Millisecond))
		})
	}
}

// The default lifetime of a counter is minutes, not days.
func TestFenceCounterDefaultLifetime(t *testing.T) {
	c := newCluster(t, 3)
	const ttl = 2 * time.Second
	l := c.locker(t, redlock.WithFencing(), redlock.WithTTL(ttl))
	lock := mustObtain(t, l, "f")
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Obtain returns once a majority granted: the third node's counter
	// may come a moment later.
	c.awaitKey(t, "redlock:fence:f")
	for i, cl := range c.clients {
		d, err := cl.PTTL(t.Context(), "redlock:fence:f").Result()
		if err != nil {
			t.Fatal(err)
		}
		if d <= time.Minute || d > 5*time.Minute+ttl {
			t.Errorf("node %d: counter expires in %v, want in (1m, 5m+TTL]", i, d)
		}
	}
}

// A lifetime that is not positive, or that overflows with the TTL, is an
// error matching ErrInvalid, from New and from a call.
func TestFenceLifetimeRejectsBadValues(t *testing.T) {
	c := newCluster(t, 1)
	for _, tt := range []struct {
		life time.Duration
		want string
	}{
		{0, "fence lifetime 0s is below 1s"},
		{-time.Second, "fence lifetime -1s is below 1s"},
		{400 * time.Millisecond, "fence lifetime 400ms is below 1s"},
		{time.Duration(1<<63 - 1), "out of range"},
	} {
		if _, err := redlock.New(c.clients, redlock.WithFenceLifetime(tt.life)); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New with lifetime %v: error %v, want ErrInvalid mentioning %q", tt.life, err, tt.want)
		}
	}
	l := c.locker(t, redlock.WithFencing())
	if _, err := l.TryObtain(t.Context(), "k", redlock.WithFenceLifetime(0)); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("TryObtain with lifetime 0: %v, want ErrInvalid", err)
	}
	if n, err := c.clients[0].DBSize(t.Context()).Result(); err != nil || n != 0 {
		t.Fatalf("a rejected TryObtain left %d keys (%v)", n, err)
	}
}

// dbSizes is DBSIZE on every node.
func dbSizes(t *testing.T, clients []*redis.Client) []int64 {
	t.Helper()
	out := make([]int64, len(clients))
	for i, cl := range clients {
		n, err := cl.DBSize(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = n
	}
	return out
}
