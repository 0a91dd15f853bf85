package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

func TestObtainRejectsBadInput(t *testing.T) {
	l := newCluster(t, 1).locker(t)
	tests := []struct {
		name string
		key  string
		opts []redlock.LockOption
		want string
	}{
		{"empty key", "", nil, "empty key"},
		{"TTL not above drift", "k", []redlock.LockOption{redlock.WithTTL(time.Millisecond)}, "not above the clock drift"},
		{"empty token", "k", []redlock.LockOption{redlock.WithToken("")}, "empty token"},
		{"NUL in token", "k", []redlock.LockOption{redlock.WithToken("a\x00b")}, "NUL"},
		{"long token", "k", []redlock.LockOption{redlock.WithToken(strings.Repeat("x", redlock.MaxTokenLen+1))}, "token longer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, obtain := range map[string]func(context.Context, string, ...redlock.LockOption) (*redlock.Lock, error){
				"Obtain": l.Obtain, "TryObtain": l.TryObtain,
			} {
				_, err := obtain(t.Context(), tt.key, tt.opts...)
				if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("%s: error %v, want ErrInvalid mentioning %q", name, err, tt.want)
				}
			}
		})
	}
}

func TestObtainReleaseAcrossSizes(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("nodes=%d", n), func(t *testing.T) {
			c := newCluster(t, n)
			l := c.locker(t, redlock.WithMetadata("host=a pid=1"))
			lock := mustObtain(t, l, "job")
			if got := c.holders(t, "job", lock.Token()); got < l.Quorum() {
				t.Fatalf("token on %d nodes, want at least %d", got, l.Quorum())
			}
			if !lock.Valid() || lock.Key() != "job" || lock.Metadata() != "host=a pid=1" || lock.Fence() != 0 {
				t.Fatalf("lock = valid %v key %q meta %q fence %d", lock.Valid(), lock.Key(), lock.Metadata(), lock.Fence())
			}
			if left := time.Until(lock.Until()); left <= 0 || left > 10*time.Second {
				t.Fatalf("Until is %v away, want within the 10s TTL", left)
			}
			// Another owner is refused while it is held.
			if _, err := l.TryObtain(t.Context(), "job"); !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("second TryObtain: %v, want ErrNotObtained", err)
			}
			if err := lock.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			if lock.Valid() {
				t.Fatal("lock still valid after Release")
			}
			if err := l.Close(); err != nil { // wait for stragglers of the release
				t.Fatal(err)
			}
			if got := c.holders(t, "job", lock.Token()); got != 0 {
				t.Fatalf("token still on %d nodes after Release", got)
			}
		})
	}
}

func TestContentionErrorHasNodeDetail(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	held := mustObtain(t, l, "busy")
	defer func() { _ = held.Release(context.Background()) }()

	_, err := l.TryObtain(t.Context(), "busy")
	if !errors.Is(err, redlock.ErrNotObtained) || errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("got %v, want ErrNotObtained only", err)
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("%v is not a *QuorumError", err)
	}
	if qe.Op != "obtain" || qe.Key != "busy" || qe.Need != 2 || len(qe.Nodes) != 3 {
		t.Fatalf("QuorumError = %+v", qe)
	}
	others := 0
	for i, n := range qe.Nodes {
		if n.Addr != c.servers[i].Addr {
			t.Errorf("node %d addr %q, want %q", i, n.Addr, c.servers[i].Addr)
		}
		if n.Outcome == redlock.OutcomeHeldByOther {
			others++
			if n.TTL <= 0 || n.TTL > 10*time.Second {
				t.Errorf("node %d holder TTL %v, want within the 10s TTL", i, n.TTL)
			}
		}
	}
	if others < 2 {
		t.Fatalf("only %d nodes reported another holder: %v", others, err)
	}
	if !strings.Contains(err.Error(), "held by another") {
		t.Fatalf("message %q does not say the key is held", err)
	}
}

func TestMinorityDown(t *testing.T) {
	c := newCluster(t, 5)
	l := c.locker(t)
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.servers[3].Kill(); err != nil {
		t.Fatal(err)
	}
	lock := mustObtain(t, l, "k")
	if err := lock.Extend(t.Context(), 10*time.Second); err != nil {
		t.Fatalf("Extend with a minority down: %v", err)
	}
	if ttl, err := lock.TTL(t.Context()); err != nil || ttl <= 9*time.Second {
		t.Fatalf("TTL = %v, %v; want about 10s", ttl, err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatalf("Release with a minority down: %v", err)
	}
}

func TestMajorityDownIsNoQuorum(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	for _, s := range c.servers[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v, want ErrNoQuorum only", err)
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.Nodes[0].Outcome != redlock.OutcomeError || qe.Nodes[0].Err == nil {
		t.Fatalf("want node 0 reported as an error, got %v", err)
	}
	// The node that granted was cleaned up.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if v := c.value(t, 2, "k"); v != "" {
		t.Fatalf("surviving node keeps %q after a failed attempt", v)
	}
}

func TestObtainWaitsForRelease(t *testing.T) {
	l := newCluster(t, 3).locker(t)
	held := mustObtain(t, l, "k")
	got := make(chan error, 1)
	go func() {
		lock, err := l.Obtain(t.Context(), "k", redlock.WithRetry(redlock.LinearBackoff(5*time.Millisecond)))
		if err == nil {
			err = lock.Release(context.Background())
		}
		got <- err
	}()
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting Obtain: %v", err)
	}
}

func TestObtainContextEnds(t *testing.T) {
	l := newCluster(t, 3).locker(t)
	held := mustObtain(t, l, "k")
	defer func() { _ = held.Release(context.Background()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := l.Obtain(ctx, "k", redlock.WithRetry(redlock.LinearBackoff(10*time.Millisecond)))
	if !errors.Is(err, redlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrNotObtained joined with DeadlineExceeded", err)
	}
}

func TestObtainRetryLimit(t *testing.T) {
	c := newCluster(t, 1)
	l := c.locker(t)
	held := mustObtain(t, l, "k")
	defer func() { _ = held.Release(context.Background()) }()
	counter := newWire(t, c.servers[0])
	l2 := newLocker(t, []*redis.Client{counter.Client})
	_, err := l2.Obtain(t.Context(), "k", redlock.WithRetry(redlock.LimitRetry(redlock.LinearBackoff(time.Millisecond), 3)))
	if !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v", err)
	}
	// Giving up on contention asks the refusing node for the holder's
	// metadata once, for the error: one script call more.
	if n := counter.calls(); n != 4+1 {
		t.Fatalf("%d script calls, want 5 (1 + 3 retries, and the holder's metadata)", n)
	}
	counter.reset()
	if _, err := l2.Obtain(t.Context(), "k", redlock.WithRetry(redlock.NoRetry())); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v", err)
	}
	if n := counter.calls(); n != 1+1 {
		t.Fatalf("NoRetry made %d script calls, want 2 (1 attempt and the holder's metadata)", n)
	}
}

// Many goroutines fight over one key on three nodes; the shared counter
// shows nobody ever entered while another was inside.
func TestMutualExclusionUnderContention(t *testing.T) {
	l := newCluster(t, 3).locker(t)
	var inside, max, total int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				lock, err := l.Obtain(t.Context(), "shared", redlock.WithRetry(redlock.ExponentialBackoff(time.Millisecond, 20*time.Millisecond)))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside++
				total++
				max = maxInt(max, inside)
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				if err := lock.Release(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if max != 1 || total != 80 {
		t.Fatalf("max inside = %d over %d holds, want 1 over 80", max, total)
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
