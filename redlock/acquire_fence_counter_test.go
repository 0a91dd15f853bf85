package redlock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

// Fencing counters expire, so that keys locked once do not keep memory on
// the nodes forever; every grant and write-back renews them, and fences
// keep growing after one expired.
func TestFenceCounterLifetime(t *testing.T) {
	const counter = "redlock:fence:f"
	pttl := func(t *testing.T, cl redis.UniversalClient) time.Duration {
		t.Helper()
		d, err := cl.PTTL(t.Context(), counter).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	t.Run("grant and write-back set the expiry", func(t *testing.T) {
		c := newCluster(t, 3)
		ttl, life := 2*time.Second, time.Minute
		l := c.locker(t, redlock.WithFencing(), redlock.WithTTL(ttl), redlock.WithFenceLifetime(life))
		// Node 2 holds the key for someone else, and a counter far ahead
		// with a short expiry: it grants nothing, but takes the write-back.
		if err := c.clients[2].Set(t.Context(), "f", "other\x001\x00", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.clients[2].Set(t.Context(), counter, "99999999999999999", 5*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		lock := mustObtain(t, l, "f")
		// The write-back to node 2 is decided at a majority; wait for it.
		poll(t, 10*time.Second, func() bool { return pttl(t, c.clients[2]) > 5*time.Second })
		for i, cl := range c.clients {
			if d := pttl(t, cl); d <= life || d > life+ttl {
				t.Errorf("node %d: counter expires in %v, want in (%v, %v]", i, d, life, life+ttl)
			}
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("fences grow after the counters expired", func(t *testing.T) {
		c := newCluster(t, 3)
		// Short enough to wait for, long enough for node timeouts of a
		// second (testOpts) on a loaded machine.
		ttl, life := 2*time.Second, 100*time.Millisecond
		l := c.locker(t, redlock.WithFencing(), redlock.WithTTL(ttl), redlock.WithFenceLifetime(life))
		lock := mustObtain(t, l, "f")
		first := lock.Fence()
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		for i, cl := range c.clients {
			gone := func() bool { return pttl(t, cl) == -2 } // -2: no such key
			if !poll(t, 10*time.Second, gone) {
				t.Fatalf("node %d: counter still there (expires in %v) long after its lifetime %v", i, pttl(t, cl), life+ttl)
			}
		}
		next := mustObtain(t, l, "f")
		if next.Fence() <= first {
			t.Fatalf("fence %d after %d, once the counters expired", next.Fence(), first)
		}
		if err := next.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// poll reports whether cond came true within d, checking it every 10ms.
func poll(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			return cond()
		case <-t.Context().Done():
			return false
		}
	}
	return true
}
