package redlock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

var stateKeys = flag.Int("statekeys", 120, "TestNothingLeftOfManyKeys: how many distinct keys of each kind to lock (try 100000)")

// What the library writes for a key it no longer holds is gone once the
// TTLs and lifetimes have passed: many distinct keys of every kind (a
// mutex, fenced or not, released, cooled down, left to expire or kept by
// lock-delay; a multi-key lock; a semaphore's permit; a read-write lock's
// reader and writer, and a writer that waited behind a reader and gave up;
// a leadership) leave nothing on any node but the restart guard's marker
// (one per node). docs/internals.md lists each key, its lifetime and its
// size.
func TestNothingLeftOfManyKeys(t *testing.T) {
	const (
		ttl, life = 2 * time.Second, 500 * time.Millisecond
		cooldown  = 500 * time.Millisecond
		workers   = 16
	)
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithRestartGuard(10*time.Second), redlock.WithTTL(ttl), redlock.WithNodeTimeout(500*time.Millisecond), redlock.WithShortFenceLifetime(life))
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	fenced := redlock.WithFencing()
	// release ends a lock as the kind says: released, cooled down, or left
	// to expire (i odd) for the kinds that may be.
	release := func(ctx context.Context, lock *redlock.Lock, i int, expire bool) error {
		if expire && i%2 == 1 {
			return nil
		}
		return lock.Release(ctx)
	}
	kinds := []struct {
		name string
		lock func(ctx context.Context, i int) error
	}{
		{"mutex", func(ctx context.Context, i int) error {
			lock, err := l.Obtain(ctx, fmt.Sprintf("mutex-%d", i))
			if err != nil {
				return err
			}
			return release(ctx, lock, i, true)
		}},
		{"fenced mutex", func(ctx context.Context, i int) error {
			lock, err := l.Obtain(ctx, fmt.Sprintf("fenced-%d", i), fenced)
			if err != nil {
				return err
			}
			return release(ctx, lock, i, true)
		}},
		{"cooldown", func(ctx context.Context, i int) error {
			lock, err := l.Obtain(ctx, fmt.Sprintf("cooldown-%d", i), fenced)
			if err != nil {
				return err
			}
			return lock.ReleaseAfter(ctx, cooldown)
		}},
		{"lock-delay", func(ctx context.Context, i int) error {
			lock, err := l.Obtain(ctx, fmt.Sprintf("delay-%d", i), redlock.WithLockDelay(cooldown))
			if err != nil {
				return err
			}
			return release(ctx, lock, i, true)
		}},
		{"multi-key", func(ctx context.Context, i int) error {
			lock, err := l.ObtainMulti(ctx, []string{fmt.Sprintf("multi-a-%d", i), fmt.Sprintf("multi-b-%d", i)})
			if err != nil {
				return err
			}
			return release(ctx, lock, i, true)
		}},
		{"semaphore", func(ctx context.Context, i int) error {
			lock, err := l.Semaphore(fmt.Sprintf("sem-%d", i), 2).Obtain(ctx, fenced)
			if err != nil {
				return err
			}
			return release(ctx, lock, i, true)
		}},
		{"reader", func(ctx context.Context, i int) error {
			lock, err := l.RWMutex(fmt.Sprintf("rw-%d", i)).RLock(ctx, fenced)
			if err != nil {
				return err
			}
			return release(ctx, lock, i, true)
		}},
		{"writer", func(ctx context.Context, i int) error {
			lock, err := l.RWMutex(fmt.Sprintf("rww-%d", i)).Lock(ctx, fenced)
			if err != nil {
				return err
			}
			return release(ctx, lock, i, true)
		}},
		{"waiting writer", func(ctx context.Context, i int) error {
			// A reader holds it; a writer waits (and marks), then gives
			// up; the reader ends.
			m := l.RWMutex(fmt.Sprintf("rwm-%d", i))
			r, err := m.RLock(ctx)
			if err != nil {
				return err
			}
			// The writer gives up once its mark is there.
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			marked := make(chan bool, 1)
			go func() {
				defer cancel()
				marked <- poll(t, 10*time.Second, func() bool {
					n, err := c.clients[0].Exists(ctx, fmt.Sprintf("redlock:rw:rwm-%d:wait", i)).Result()
					return err == nil && n == 1
				})
			}()
			if w, err := m.Lock(wctx); err == nil {
				return errors.Join(errors.New("writer beside a reader"), w.Release(ctx), r.Release(ctx))
			} else if !errors.Is(err, context.Canceled) {
				return errors.Join(err, r.Release(ctx))
			}
			if !<-marked {
				return errors.Join(errors.New("the waiting writer left no mark"), r.Release(ctx))
			}
			return release(ctx, r, i, true)
		}},
		{"leadership", func(ctx context.Context, i int) error {
			ld, err := l.Campaign(ctx, fmt.Sprintf("elect-%d", i))
			if err != nil {
				return err
			}
			return ld.Resign(ctx)
		}},
	}
	n := *stateKeys
	type job struct{ kind, i int }
	jobs := make(chan job, n*len(kinds))
	for i := range n {
		for k := range kinds {
			jobs <- job{k, i}
		}
	}
	close(jobs)
	errs := make(chan error, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				if err := kinds[j.kind].lock(t.Context(), j.i); err != nil {
					errs <- fmt.Errorf("%s %d: %w", kinds[j.kind].name, j.i, err)
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
	t.Logf("%d keys of each of %d kinds in %v; keys per node right after: %v", n, len(kinds), took.Round(time.Millisecond), dbSizes(t, c.clients))
	// Every kind of state was written: the keys of the last locks live on
	// (their TTL, the counters' lifetime, the mark's margin).
	shapes := logKeySizes(t, c.clients[0])
	for _, want := range []string{"mutex-N", "rww-N", "multi-a-N", "redlock:fence:fenced-N", "redlock:fence:elect-N",
		"redlock:fence:redlock:sem:sem-N:N", "redlock:sem:sem-N:N", "redlock:sem:sem-N:size",
		"redlock:rw:rw-N:r:N", "redlock:rw:rw-N:readers", "redlock:rw:rwm-N:wait"} {
		if shapes[want] == 0 {
			t.Errorf("no key %q on node 0 right after the run: that kind of state went untested", want)
		}
	}

	// Left: the guard's marker, one per node, which lives as long as the
	// node (it is how the node knows it has not lost its memory).
	var left []int64
	if !poll(t, 3*ttl+life+30*time.Second, func() bool {
		left = dbSizes(t, c.clients)
		return slices.Max(left) <= 1
	}) {
		for i, cl := range c.clients {
			keys, _, err := cl.Scan(t.Context(), 0, "*", 20).Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("node %d: %d keys, among them %q", i, left[i], keys)
		}
		t.Fatalf("keys per node %v, %v after the last lock ended, want only the guard's marker", left, time.Since(start)-took)
	}
	for i, cl := range c.clients {
		if n, err := cl.Exists(t.Context(), markerKey).Result(); err != nil || n != 1 {
			t.Errorf("node %d: the one key left is not the guard's marker (%d, %v)", i, n, err)
		}
	}
	t.Logf("keys per node %v, %v after the last lock ended", left, (time.Since(start) - took).Round(time.Millisecond))
}

// logKeySizes logs, per shape of key name (digits as N), how many keys
// of it cl holds and the MEMORY USAGE and PTTL of one: what
// docs/internals.md's table of keys states. It returns the counts.
func logKeySizes(t *testing.T, cl *redis.Client) map[string]int {
	t.Helper()
	type shape struct {
		n     int
		first string
	}
	shapes := map[string]*shape{}
	iter := cl.Scan(t.Context(), 0, "*", 1000).Iterator()
	for iter.Next(t.Context()) {
		key := iter.Val()
		name := digits.ReplaceAllString(key, "N")
		if len(name) > 40 {
			name = name[:40] + "…"
		}
		if shapes[name] == nil {
			shapes[name] = &shape{first: key}
		}
		shapes[name].n++
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(shapes)) {
		s := shapes[name]
		size, err := cl.MemoryUsage(t.Context(), s.first).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		pttl, err := cl.PTTL(t.Context(), s.first).Result()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%6d  %-44q  MEMORY USAGE %4d B  PTTL %v", s.n, name, size, pttl)
	}
	counts := make(map[string]int, len(shapes))
	for name, s := range shapes {
		counts[name] = s.n
	}
	return counts
}

// digits are the runs of digits and hex in a key name (indexes, nonces,
// tokens).
var digits = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}|[0-9a-z]{10,}|[0-9]+`)
