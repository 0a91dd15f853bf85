package redlock_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/redlock"
)

func TestServerMillisRoundsUp(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{time.Nanosecond, 1},
		{time.Millisecond, 1},
		{time.Millisecond + time.Nanosecond, 2},
		{10*time.Millisecond + 900*time.Microsecond, 11},
		{8 * time.Second, 8000},
		{math.MaxInt64, int64(math.MaxInt64/time.Millisecond) + 1},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			if got := redlock.ServerMillis(tt.d); got != tt.want {
				t.Fatalf("ServerMillis(%v) = %d, want %d", tt.d, got, tt.want)
			}
		})
	}
}

func FuzzServerMillis(f *testing.F) {
	f.Add(int64(10_900_000))
	f.Add(int64(1))
	f.Fuzz(func(t *testing.T, n int64) {
		if n < 0 || n > 1<<53 {
			return // durations are not negative; above 2^53 float64 is inexact
		}
		d := time.Duration(n)
		if got, want := redlock.ServerMillis(d), int64(math.Ceil(float64(n)/1e6)); got != want {
			t.Fatalf("ServerMillis(%v) = %d, want %d", d, got, want)
		}
	})
}

// sentArgs returns the arguments of every script call that named key, as the
// server received them, from its slow log (which logs every command with
// slowlog-log-slower-than 0).
func sentArgs(t *testing.T, c *redis.Client, key string) [][]string {
	t.Helper()
	entries, err := c.SlowLogGet(t.Context(), -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, e := range entries {
		if len(e.Args) > 3 && (e.Args[0] == "evalsha" || e.Args[0] == "eval") && slices.Contains(e.Args[3:], key) {
			out = append(out, e.Args)
		}
	}
	return out
}

// What the servers get is rounded up to the millisecond: TTLs of
// acquisition, re-entry, Extend and handoff, and ReleaseAfter's cooldown.
// Truncated, a TTL of 300.9ms would reach Redis as 300ms while the validity
// counts on 300.9ms, eating into the 2ms drift margin.
func TestServerMillisecondsRoundUp(t *testing.T) {
	clients := newLoggedCluster(t, 1).clients
	l := newLocker(t, clients, redlock.WithNodeTimeout(100*time.Millisecond))
	const frac = 900 * time.Microsecond
	tests := []struct {
		name string
		// run does its part on key; want is the milliseconds that must
		// reach the server (one less, the truncation, must not).
		run  func(t *testing.T, key string)
		want string
	}{
		{"acquisition", func(t *testing.T, key string) {
			mustObtain(t, l, key, redlock.WithTTL(300*time.Millisecond+frac))
		}, "301"},
		{"re-entry", func(t *testing.T, key string) {
			outer := mustObtain(t, l, key, redlock.WithTTL(200*time.Millisecond))
			mustObtain(t, l, key, redlock.WithToken(outer.Token()), redlock.WithTTL(310*time.Millisecond+frac))
		}, "311"},
		{"Extend", func(t *testing.T, key string) {
			lock := mustObtain(t, l, key, redlock.WithTTL(200*time.Millisecond))
			if err := lock.Extend(t.Context(), 320*time.Millisecond+frac); err != nil {
				t.Fatal(err)
			}
		}, "321"},
		{"ReleaseAfter", func(t *testing.T, key string) {
			lock := mustObtain(t, l, key, redlock.WithTTL(200*time.Millisecond))
			if err := lock.ReleaseAfter(t.Context(), 330*time.Millisecond+frac); err != nil {
				t.Fatal(err)
			}
		}, "331"},
		{"handoff", func(t *testing.T, key string) {
			held := mustObtain(t, l, key)
			got := obtainAsync(t.Context(), l, key, slowRetry, redlock.WithTTL(340*time.Millisecond+frac))
			awaitOffer(t, l, key)
			if err := held.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			if o := <-got; o.err != nil {
				t.Fatal(o.err)
			}
			// It must have been a handoff: the script with the release's
			// four arguments, then the acquisition's value, TTL, prefix.
			for _, args := range sentArgs(t, clients[0], key) {
				if len(args) == 11 && args[9] == "341" {
					return
				}
			}
			t.Fatalf("no handoff script with a TTL of 341 ms: %q", sentArgs(t, clients[0], key))
		}, "341"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "ms-" + tt.name
			tt.run(t, key)
			var sent bool
			truncated := tt.want[:len(tt.want)-1] + string(tt.want[len(tt.want)-1]-1)
			for _, args := range sentArgs(t, clients[0], key) {
				if slices.Contains(args, truncated) {
					t.Fatalf("sent %q (truncated): %q", truncated, args)
				}
				sent = sent || slices.Contains(args, tt.want)
			}
			if !sent {
				t.Fatalf("no script call carried %s ms: %q", tt.want, sentArgs(t, clients[0], key))
			}
		})
	}
}

// The local validity counts from the TTL as given, not as rounded up for
// the servers: the lock is never valid longer than the servers hold it.
func TestValidityUsesUnroundedTTL(t *testing.T) {
	fake := clock.NewFake(time.Now())
	l := newLocker(t, newCluster(t, 3).clients, redlock.WithClock(fake), redlock.WithNodeTimeout(100*time.Millisecond))
	ttl := 300*time.Millisecond + 900*time.Microsecond
	lock := mustObtain(t, l, "v", redlock.WithTTL(ttl))
	// The fake clock stood still: validity is the TTL less the drift.
	if got, want := lock.Until().Sub(fake.Now()), clock.Validity(ttl, 0, redlock.DefaultDriftFactor); got != want {
		t.Fatalf("validity %v, want %v", got, want)
	}
	if err := lock.Extend(t.Context(), ttl+time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got, want := lock.Until().Sub(fake.Now()), clock.Validity(ttl+time.Millisecond, 0, redlock.DefaultDriftFactor); got != want {
		t.Fatalf("validity after Extend %v, want %v", got, want)
	}
}
