package redlock_test

import (
	"slices"
	"strconv"
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
	pttl := func(t *testing.T, cl *redis.Client) time.Duration {
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
		l := c.locker(t, redlock.WithFencing(), redlock.WithTTL(ttl), redlock.WithShortFenceLifetime(life))
		// Node 2 holds the key for someone else, and a counter a lead
		// ahead of its clock with a short expiry: it grants nothing, but
		// takes the write-back, and keeps its counter the lead longer.
		if err := c.clients[2].Set(t.Context(), "f", "other\x001\x00", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		const lead = 30 * time.Second
		now, err := c.clients[2].Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		ahead := strconv.FormatInt(now.Add(lead).UnixMicro(), 10)
		if err := c.clients[2].Set(t.Context(), counter, ahead, 5*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		lock := mustObtain(t, l, "f")
		// The write-back to node 2 is decided at a majority; wait for it.
		poll(t, 10*time.Second, func() bool { return pttl(t, c.clients[2]) > 5*time.Second })
		for i, cl := range c.clients {
			low, high := life, life+ttl
			if i == 2 {
				low, high = life+lead-time.Second, life+ttl+lead
			}
			if d := pttl(t, cl); d <= low || d > high {
				t.Errorf("node %d: counter expires in %v, want in (%v, %v]", i, d, low, high)
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
		l := c.locker(t, redlock.WithFencing(), redlock.WithTTL(ttl), redlock.WithShortFenceLifetime(life))
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

// A grant sets the counter's expiry only when it starts it again from the
// clock, at a window's first grant; a key locked over and over keeps a
// counter that lives at least its lifetime less two windows (200 ms).
func TestFenceCounterOfBusyKeyLives(t *testing.T) {
	c := newCluster(t, 3)
	ttl, life := 2*time.Second, time.Minute
	l := c.locker(t, redlock.WithFencing(), redlock.WithTTL(ttl), redlock.WithShortFenceLifetime(life))
	// Measured from before each grant; 100 ms more than the bound for the
	// time between the grant and the reading.
	want := life + ttl - 300*time.Millisecond
	start := time.Now()
	grants := 0
	for time.Since(start) < time.Second {
		lock := mustObtain(t, l, "f")
		grants++
		c.heldEverywhere(t, "f", lock.Token())
		for i, cl := range c.clients {
			d, err := cl.PTTL(t.Context(), "redlock:fence:f").Result()
			if err != nil {
				t.Fatal(err)
			}
			if d < want {
				t.Fatalf("node %d after %d grants in %v: counter expires in %v, want at least %v", i, grants, time.Since(start), d, want)
			}
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// A handful suffice: every grant after the first window's would find
	// a counter that was never renewed.
	if grants < 5 {
		t.Fatalf("only %d grants in a second", grants)
	}
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

// A lock kept by Extend outlives its fencing counters: a re-entry then gets
// a fence above the outer's, never 0.
func TestReentryAfterCounterExpired(t *testing.T) {
	c := newCluster(t, 3)
	const ttl, life = 3 * time.Second, 300 * time.Millisecond
	l := c.locker(t, redlock.WithFencing(), redlock.WithTTL(ttl), redlock.WithShortFenceLifetime(life))
	outer := mustObtain(t, l, "f")
	if err := outer.Extend(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The counters live life+TTL after the grant; the key, extended, lives on.
	gone := poll(t, 10*time.Second, func() bool {
		for _, cl := range c.clients {
			if n, err := cl.Exists(t.Context(), "redlock:fence:f").Result(); err != nil || n != 0 {
				return false
			}
		}
		return true
	})
	if !gone {
		t.Fatal("fencing counters did not expire")
	}
	c.heldEverywhere(t, "f", outer.Token())
	in := mustObtain(t, l, "f", redlock.WithToken(outer.Token()))
	if in.Fence() <= outer.Fence() {
		t.Fatalf("re-entry after the counters expired has fence %d, want above the outer's %d", in.Fence(), outer.Fence())
	}
	if err := in.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := outer.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A busy key's counter is written with its expiry only when a grant moves
// it up to a new start, which the client offers on the servers' 100 ms
// grid; the grants in between count on by one (INCR). At 10 ms steps
// nearly every grant of a key locked more than a hundred times a second
// wrote it: one command more per grant on every node.
func TestFenceCounterOfBusyKeyWrittenOncePerWindow(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, append(slices.Clone(testOpts), redlock.WithFencing())...)
	// The first grant starts each counter from the exact clock (and may
	// need a write-back); counted from after it.
	lock := mustObtain(t, l, "busy")
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, cl := range c.clients {
		if err := cl.ConfigResetStat(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	start, grants := time.Now(), 0
	for time.Since(start) < 600*time.Millisecond || grants < 100 {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("only %d grants in %v", grants, time.Since(start))
		}
		lock := mustObtain(t, l, "busy")
		grants++
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	// One write per 100 ms window begun, twice over for the margin.
	bound := 2 * (int(elapsed/(100*time.Millisecond)) + 2)
	for i, cl := range c.clients {
		// Each grant's SET NX of the lock key, and the counter's writes.
		sets, _, _ := cmdStat(t, cl, "set")
		writes := int(sets) - grants
		t.Logf("node %d: %d counter writes in %d grants over %v", i, writes, grants, elapsed.Round(time.Millisecond))
		if writes > bound {
			t.Errorf("node %d: the counter was written %d times in %d grants over %v, want at most %d", i, writes, grants, elapsed.Round(time.Millisecond), bound)
		}
	}
}
