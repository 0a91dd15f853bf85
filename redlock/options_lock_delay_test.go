package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// pttls returns key's remaining TTL on every node of the cluster.
func (c *cluster) pttls(t *testing.T, key string) []time.Duration {
	t.Helper()
	out := make([]time.Duration, len(c.clients))
	for i, cl := range c.clients {
		d, err := cl.PTTL(context.Background(), key).Result()
		if err != nil {
			t.Fatalf("PTTL %s on node %d: %v", key, i, err)
		}
		out[i] = d
	}
	return out
}

// assertPTTLs fails unless key is on a majority of nodes and its TTL is in
// (low, high] on every node that has it. A call returns at a majority, so a
// node it did not wait for may still be about to set the key or its TTL: the
// check is repeated for up to a second before it fails.
// awaitKey waits, up to 10s, until key exists on every node of the
// cluster, and fails the test if it does not: a round decided by a
// majority may reach the last node a moment after it returned.
func (c *cluster) awaitKey(t *testing.T, key string) {
	t.Helper()
	if !poll(t, 10*time.Second, func() bool {
		for _, cl := range c.clients {
			if n, err := cl.Exists(t.Context(), key).Result(); err != nil || n != 1 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("%q never on every node", key)
	}
}

func (c *cluster) assertPTTLs(t *testing.T, key string, low, high time.Duration) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		problems := c.pttlProblems(t, key, low, high)
		if len(problems) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range problems {
				t.Error(p)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *cluster) pttlProblems(t *testing.T, key string, low, high time.Duration) []string {
	t.Helper()
	var problems []string
	n := 0
	for i, d := range c.pttls(t, key) {
		if d == -2*time.Nanosecond { // go-redis's "no such key"
			continue
		}
		n++
		if d <= low || d > high {
			problems = append(problems, fmt.Sprintf("node %d: PTTL %v, want in (%v, %v]", i, d, low, high))
		}
	}
	if n <= len(c.clients)/2 {
		problems = append(problems, fmt.Sprintf("key %q on %d of %d nodes", key, n, len(c.clients)))
	}
	return problems
}

// TestLockDelayAfterUncleanEnd: a holder that neither releases nor extends
// (it crashed) keeps the key from others until TTL + lock-delay after it
// obtained it, and without lock-delay only until the TTL. In between, the
// key is reported held (contention), not an outage.
func TestLockDelayAfterUncleanEnd(t *testing.T) {
	const (
		ttl   = time.Second
		delay = 2 * time.Second
		// Redis expires keys to the millisecond, and the key was set after
		// start.
		precision = 2 * time.Millisecond
	)
	tests := []struct {
		name  string
		delay time.Duration
		// The second owner gets the key no sooner than notBefore after the
		// first one started to obtain it, and, if set, before notAfter.
		notBefore, notAfter time.Duration
	}{
		{"lock-delay", delay, ttl + delay - precision, 0},
		{"no lock-delay (control)", 0, ttl - precision, ttl + delay},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 3)
			// Node calls far below the short TTL.
			fast := redlock.WithNodeTimeout(250 * time.Millisecond)
			crashed := c.locker(t, fast) // a process that dies holding the lock
			other := c.locker(t, fast)
			start := time.Now()
			lock, err := crashed.TryObtain(t.Context(), "job", redlock.WithTTL(ttl), redlock.WithLockDelay(tt.delay))
			if err != nil {
				t.Fatal(err)
			}
			// The holder's validity ignores the delay.
			if v := lock.Until().Sub(start); v > ttl {
				t.Fatalf("validity %v, above the TTL %v", v, ttl)
			}
			if tt.delay > 0 {
				// Past the holder's TTL, within the delay: held, by
				// another owner.
				wait := time.NewTimer(time.Until(start.Add(ttl + 200*time.Millisecond)))
				<-wait.C
				_, err := other.TryObtain(t.Context(), "job", redlock.WithTTL(ttl))
				var qe *redlock.QuorumError
				if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
					t.Fatalf("TryObtain within the delay: %v, want ErrNotObtained", err)
				}
				if time.Since(start) >= ttl+tt.delay-precision {
					t.Fatal("the machine was too slow to try within the delay")
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			next, err := other.Obtain(ctx, "job", redlock.WithTTL(ttl))
			got := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			defer releaseIfHeld(next)
			if got < tt.notBefore {
				t.Fatalf("second owner got the key %v after the first obtained it, want at least %v", got, tt.notBefore)
			}
			if tt.notAfter > 0 && got >= tt.notAfter {
				t.Fatalf("second owner got the key %v after the first obtained it, want before %v", got, tt.notAfter)
			}
		})
	}
}

// TestLockDelayCleanEnd: Release and ForceRelease free the key at once, delay
// or not.
func TestLockDelayCleanEnd(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithLockDelay(time.Minute))
	other := c.locker(t)
	tests := []struct {
		name string
		end  func(*redlock.Lock) error
	}{
		{"Release", func(k *redlock.Lock) error { return k.Release(t.Context()) }},
		{"ForceRelease", func(k *redlock.Lock) error { return l.ForceRelease(t.Context(), k.Key()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "clean-" + tt.name
			lock := mustObtain(t, l, key)
			c.assertPTTLs(t, key, time.Minute, time.Minute+10*time.Second)
			if err := tt.end(lock); err != nil {
				t.Fatal(err)
			}
			next, err := other.TryObtain(t.Context(), key)
			if err != nil {
				t.Fatalf("TryObtain right after %s: %v", tt.name, err)
			}
			releaseIfHeld(next)
		})
	}
}

// TestLockDelayEverywhereTTLIsSent: every call that sets a key's TTL on the
// servers (acquisition, re-entry, Extend, KeepAlive, handoff) adds the delay;
// the holder's validity and Lock.TTL leave it out.
func TestLockDelayEverywhereTTLIsSent(t *testing.T) {
	const (
		ttl   = 2 * time.Second
		delay = 30 * time.Second
	)
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithTTL(ttl), redlock.WithLockDelay(delay))

	t.Run("acquire", func(t *testing.T) {
		start := time.Now()
		lock := mustObtain(t, l, "acquire")
		defer releaseIfHeld(lock)
		c.assertPTTLs(t, "acquire", ttl, ttl+delay)
		if v := lock.Until().Sub(start); v > ttl {
			t.Fatalf("validity %v, above the TTL %v", v, ttl)
		}
		left, err := lock.TTL(t.Context())
		if err != nil || left <= 0 || left > ttl {
			t.Fatalf("Lock.TTL = %v, %v; want in (0, %v]", left, err, ttl)
		}
	})

	t.Run("re-entry", func(t *testing.T) {
		lock := mustObtain(t, l, "reentry", redlock.WithLockDelay(0))
		defer releaseIfHeld(lock)
		c.assertPTTLs(t, "reentry", 0, ttl)
		again := mustObtain(t, l, "reentry", redlock.WithToken(lock.Token()))
		defer releaseIfHeld(again)
		c.assertPTTLs(t, "reentry", ttl, ttl+delay)
	})

	t.Run("Extend", func(t *testing.T) {
		lock := mustObtain(t, l, "extend")
		defer releaseIfHeld(lock)
		const longer = 5 * time.Second
		start := time.Now()
		if err := lock.Extend(t.Context(), longer); err != nil {
			t.Fatal(err)
		}
		c.assertPTTLs(t, "extend", longer+delay-time.Second, longer+delay)
		if v := lock.Until().Sub(start); v > longer || v < longer-time.Second {
			t.Fatalf("validity %v after Extend(%v)", v, longer)
		}
	})

	t.Run("KeepAlive", func(t *testing.T) {
		// Short enough to see extensions within the test, long enough
		// for them on a busy machine (600ms and a 150ms node timeout
		// lost the lock there).
		const short = 1500 * time.Millisecond
		lock := mustObtain(t, l, "keepalive", redlock.WithTTL(short), redlock.WithLockDelay(time.Second), redlock.WithNodeTimeout(400*time.Millisecond))
		defer releaseIfHeld(lock)
		held, stop := lock.KeepAlive(t.Context())
		defer stop()
		// Past the TTL only extensions keep the lock valid; each set the
		// keys to TTL + delay again.
		wait := time.NewTimer(2 * short)
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-held.Done():
			t.Fatalf("lost: %v", context.Cause(held))
		}
		if !lock.Valid() {
			t.Fatal("lock no longer valid after two TTLs of KeepAlive")
		}
		// Without the extensions' delay, the keys would be at most one
		// TTL from expiry.
		c.assertPTTLs(t, "keepalive", short, short+time.Second)
	})

	t.Run("handoff", func(t *testing.T) {
		first := mustObtain(t, l, "handoff", redlock.WithLockDelay(0))
		got := make(chan *redlock.Lock, 1)
		go func() {
			lock, err := l.Obtain(t.Context(), "handoff", slowRetry)
			if err != nil {
				t.Error(err)
			}
			got <- lock
		}()
		awaitOffer(t, l, "handoff")
		if err := first.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		next := <-got
		if next == nil {
			t.FailNow()
		}
		defer releaseIfHeld(next)
		c.assertPTTLs(t, "handoff", ttl, ttl+delay)
	})
}

// TestLockDelayRejectsBadValues: a negative delay, one that overflows, and
// one that makes the keys outlive the restart guard are errors matching
// ErrInvalid, from New, from a call, and from Extend, which then asks no
// server.
func TestLockDelayRejectsBadValues(t *testing.T) {
	c := newCluster(t, 1)
	tests := []struct {
		name string
		opts []redlock.Option
		want string
	}{
		{"negative", []redlock.Option{redlock.WithLockDelay(-time.Millisecond)}, "lock-delay -1ms must not be negative"},
		{"overflow", []redlock.Option{redlock.WithLockDelay(math.MaxInt64)}, "out of range"},
		{"above the guard", []redlock.Option{redlock.WithRestartGuard(time.Minute), redlock.WithTTL(50 * time.Second), redlock.WithLockDelay(11 * time.Second)}, "plus lock-delay 11s is above the restart guard's maximum TTL 1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redlock.New(c.clients, tt.opts...)
			if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: error %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}

	guarded := c.locker(t, redlock.WithRestartGuard(time.Minute), redlock.WithTTL(50*time.Second))
	if err := guarded.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Run("per call", func(t *testing.T) {
		for _, d := range []time.Duration{-time.Second, 11 * time.Second} {
			if _, err := guarded.TryObtain(t.Context(), "k", redlock.WithLockDelay(d)); !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("TryObtain with lock-delay %v: %v, want ErrInvalid", d, err)
			}
		}
	})
	t.Run("Extend", func(t *testing.T) {
		lock := mustObtain(t, guarded, "k", redlock.WithTTL(10*time.Second), redlock.WithLockDelay(30*time.Second))
		defer releaseIfHeld(lock)
		before := lock.Until()
		err := lock.Extend(t.Context(), 40*time.Second)
		if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "restart guard") {
			t.Fatalf("Extend past the guard: %v, want ErrInvalid", err)
		}
		if !lock.Until().Equal(before) || !lock.Valid() {
			t.Fatal("a rejected Extend changed the lock")
		}
		c.assertPTTLs(t, "k", 30*time.Second, 40*time.Second)
	})
}
