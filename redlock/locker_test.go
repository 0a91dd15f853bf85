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

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

func TestNewRejectsBadInput(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.clients[0], c.clients[1]
	addr := c.servers[0].Addr
	port := addr[strings.LastIndexByte(addr, ':'):]
	sameAddr := redis.NewClient(&redis.Options{Addr: "localhost" + port})
	t.Cleanup(func() { _ = sameAddr.Close() })
	secret := redis.NewClient(&redis.Options{Addr: "localhost" + port, Password: "hunter2-secret"})
	t.Cleanup(func() { _ = secret.Close() })
	var nilClient *redis.Client

	tests := []struct {
		name    string
		clients []redis.UniversalClient
		opts    []redlock.Option
		want    string
	}{
		{"no clients", nil, nil, "no clients"},
		{"nil client", []redis.UniversalClient{a, nil}, nil, "client 1 is nil"},
		{"typed nil client", []redis.UniversalClient{a, nilClient}, nil, "client 1 is nil"},
		{"same client twice", []redis.UniversalClient{a, b, a}, nil, "same node"},
		{"same address twice", []redis.UniversalClient{a, sameAddr}, nil, "same node"},
		{"same address, password hidden", []redis.UniversalClient{a, secret}, nil, "same node"},
		{"zero TTL", []redis.UniversalClient{a}, []redlock.Option{redlock.WithTTL(0)}, "TTL"},
		{"TTL not above drift", []redis.UniversalClient{a}, []redlock.Option{redlock.WithTTL(2 * time.Millisecond)}, "not above the clock drift"},
		{"negative drift", []redis.UniversalClient{a}, []redlock.Option{redlock.WithDriftFactor(-0.1)}, "drift factor"},
		{"drift factor 1", []redis.UniversalClient{a}, []redlock.Option{redlock.WithDriftFactor(1)}, "drift factor"},
		{"zero node timeout", []redis.UniversalClient{a}, []redlock.Option{redlock.WithNodeTimeout(0)}, "node timeout"},
		{"node timeout above TTL", []redis.UniversalClient{a}, []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(2 * time.Second)}, "node timeout"},
		{"nil retry", []redis.UniversalClient{a}, []redlock.Option{redlock.WithRetry(nil)}, "RetryStrategy"},
		{"bad backoff", []redis.UniversalClient{a}, []redlock.Option{redlock.WithRetry(redlock.ExponentialBackoff(time.Second, time.Millisecond))}, "ExponentialBackoff"},
		{"bad linear", []redis.UniversalClient{a}, []redlock.Option{redlock.WithRetry(redlock.LinearBackoff(0))}, "LinearBackoff"},
		{"negative limit", []redis.UniversalClient{a}, []redlock.Option{redlock.WithRetry(redlock.LimitRetry(redlock.NoRetry(), -1))}, "LimitRetry"},
		{"nil clock", []redis.UniversalClient{a}, []redlock.Option{redlock.WithClock(nil)}, "clock"},
		{"token on New", []redis.UniversalClient{a}, []redlock.Option{redlock.WithToken("t")}, "WithToken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := redlock.New(tt.clients, tt.opts...)
			if err == nil {
				_ = l.Close()
				t.Fatal("New succeeded, want an error")
			}
			if !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q shows a password", err)
			}
		})
	}
}

func TestObtainRejectsBadInput(t *testing.T) {
	l := newCluster(t, 1).locker(t)
	tests := []struct {
		name string
		key  string
		opts []redlock.Option
		want string
	}{
		{"empty key", "", nil, "empty key"},
		{"TTL not above drift", "k", []redlock.Option{redlock.WithTTL(time.Millisecond)}, "not above the clock drift"},
		{"empty token", "k", []redlock.Option{redlock.WithToken("")}, "empty token"},
		{"NUL in token", "k", []redlock.Option{redlock.WithToken("a\x00b")}, "NUL"},
		{"long token", "k", []redlock.Option{redlock.WithToken(strings.Repeat("x", redlock.MaxTokenLen+1))}, "token longer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, obtain := range map[string]func(context.Context, string, ...redlock.Option) (*redlock.Lock, error){
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

// Nodes killed while a lock is held: Release and Extend report the outage,
// not a false loss.
func TestNodesDieWhileHeld(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "k")
	for _, s := range c.servers[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := lock.Extend(t.Context(), 10*time.Second); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Extend: %v, want ErrNoQuorum", err)
	}
	if !lock.Valid() {
		t.Fatal("an outage during Extend must not end the lock before its deadline")
	}
	if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Release: %v, want ErrNoQuorum", err)
	}
}

// A slow node must not delay the answer once a majority has decided it.
func TestSlowNodeDoesNotDelayDecision(t *testing.T) {
	c := newCluster(t, 3)
	slow := gatedWire(t, c.servers[2])
	clients := []redis.UniversalClient{c.clients[0], c.clients[1], slow.Client}
	l := newLocker(t, clients, redlock.WithNodeTimeout(5*time.Second))
	t.Cleanup(slow.open) // before the locker's Close, even if the test fails
	done := make(chan error, 1)
	go func() {
		lock, err := l.TryObtain(context.Background(), "k")
		if err == nil {
			err = lock.Release(context.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("obtain+release waited for the slow node")
	}
	slow.open()
}

// A node that grants after a failed round has been decided is cleaned up as
// its reply arrives: no key of ours is left anywhere.
func TestLateStragglerIsReleased(t *testing.T) {
	c := newCluster(t, 3)
	// The holder's key sits on nodes 0 and 1 only (a locker over those
	// two needs both), so the straggler on node 2 can grant.
	other := newLocker(t, c.clients[:2])
	held := mustObtain(t, other, "k")
	slow := gatedWire(t, c.servers[2])
	l := newLocker(t, []redis.UniversalClient{c.clients[0], c.clients[1], slow.Client}, redlock.WithNodeTimeout(5*time.Second))
	t.Cleanup(slow.open) // before the locker's Close, even if the test fails

	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v, want ErrNotObtained", err)
	}
	var qe *redlock.QuorumError
	if errors.As(err, &qe); qe == nil || qe.Nodes[2].Outcome != redlock.OutcomeNoReply {
		t.Fatalf("want node 2 without a reply at the decision: %v", err)
	}
	slow.open() // the straggler now sets its key, then the clean-up runs
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if v := c.value(t, 2, "k"); v != "" {
		t.Fatalf("node 2 keeps %q after the failed attempt's straggler", v)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
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
	l2 := newLocker(t, []redis.UniversalClient{counter.Client})
	_, err := l2.Obtain(t.Context(), "k", redlock.WithRetry(redlock.LimitRetry(redlock.LinearBackoff(time.Millisecond), 3)))
	if !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v", err)
	}
	if n := counter.calls(); n != 4 {
		t.Fatalf("%d attempts, want 4 (1 + 3 retries)", n)
	}
	counter.reset()
	if _, err := l2.Obtain(t.Context(), "k", redlock.WithRetry(redlock.NoRetry())); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v", err)
	}
	if n := counter.calls(); n != 1 {
		t.Fatalf("NoRetry made %d attempts", n)
	}
}

func TestReleaseAndExtendTellExpiredFromLost(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)

	t.Run("expired", func(t *testing.T) {
		lock := mustObtain(t, l, "e")
		for _, cl := range c.clients {
			if err := cl.Del(t.Context(), "e").Err(); err != nil { // as if the TTL ran out
				t.Fatal(err)
			}
		}
		err := lock.Extend(t.Context(), 10*time.Second)
		if !errors.Is(err, redlock.ErrLockExpired) || !errors.Is(err, redlock.ErrLockNotHeld) || errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("Extend: %v, want ErrLockExpired under ErrLockNotHeld", err)
		}
		if lock.Valid() {
			t.Fatal("lock valid after the servers said it expired")
		}
		if _, err := lock.TTL(t.Context()); !errors.Is(err, redlock.ErrLockExpired) {
			t.Fatalf("TTL: %v, want ErrLockExpired", err)
		}
		if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrLockExpired) {
			t.Fatalf("Release: %v, want ErrLockExpired", err)
		}
	})

	t.Run("lost", func(t *testing.T) {
		lock := mustObtain(t, l, "x")
		for _, cl := range c.clients {
			if err := cl.Set(t.Context(), "x", "someone-else\x001\x00", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		err := lock.Extend(t.Context(), 10*time.Second)
		if !errors.Is(err, redlock.ErrLockLost) || !errors.Is(err, redlock.ErrLockNotHeld) {
			t.Fatalf("Extend: %v, want ErrLockLost under ErrLockNotHeld", err)
		}
		// Loss is final: even with our keys back, Extend does not revive it.
		for _, cl := range c.clients {
			if err := cl.Set(t.Context(), "x", lock.Token()+"\x001\x00", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := lock.Extend(t.Context(), 10*time.Second); !errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("Extend after loss: %v, want the loss again", err)
		}
		if lock.Valid() {
			t.Fatal("a lost lock turned valid again")
		}
		// Release never deletes another owner's key.
		for _, cl := range c.clients {
			if err := cl.Set(t.Context(), "x", "someone-else\x001\x00", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("Release: %v, want ErrLockLost", err)
		}
		if got := c.holders(t, "x", "someone-else"); got != 3 {
			t.Fatalf("Release removed another owner's key: it remains on %d nodes", got)
		}
	})
}

func TestExtendMovesDeadline(t *testing.T) {
	c := newCluster(t, 3)
	fake := clock.NewFake(time.Now())
	l := c.locker(t, redlock.WithClock(fake), redlock.WithTTL(time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	lock := mustObtain(t, l, "k")
	first := lock.Until()
	fake.Advance(900 * time.Millisecond)
	if !lock.Valid() {
		t.Fatal("lock invalid before its deadline")
	}
	if err := lock.Extend(t.Context(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !lock.Until().After(first.Add(4 * time.Second)) {
		t.Fatalf("Until moved from %v to %v, want about 5.9s later", first, lock.Until())
	}
	ttl, err := lock.TTL(t.Context())
	if err != nil || ttl <= 4*time.Second || ttl > 5*time.Second {
		t.Fatalf("TTL = %v, %v; want just under 5s", ttl, err)
	}
	fake.Advance(6 * time.Second)
	if lock.Valid() {
		t.Fatal("lock valid past its deadline")
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The validity check uses the injected clock: a round that seemingly took
// longer than the TTL grants nothing and leaves nothing behind.
func TestNoValidityNoLock(t *testing.T) {
	c := newCluster(t, 3)
	jump := &jumpClock{Fake: clock.NewFake(time.Now()), jump: 2 * time.Second}
	l := c.locker(t, redlock.WithClock(jump), redlock.WithTTL(time.Second), redlock.WithNodeTimeout(500*time.Millisecond))
	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("got %v, want ErrNoQuorum for a majority without validity", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, v := range c.values(t, "k") {
		if v != "" {
			t.Fatalf("node %d keeps %q", i, v)
		}
	}
}

// jumpClock reports that every round took jump.
type jumpClock struct {
	*clock.Fake
	jump time.Duration
}

func (j *jumpClock) Since(t time.Time) time.Duration { return j.Fake.Since(t) + j.jump }

func TestClosedLocker(t *testing.T) {
	c := newCluster(t, 1)
	l, err := redlock.New(c.clients, testOpts...)
	if err != nil {
		t.Fatal(err)
	}
	lock := mustObtain(t, l, "k")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Obtain(t.Context(), "k"); !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("Obtain after Close: %v", err)
	}
	if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("Release after Close: %v", err)
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

// A node that refuses our credentials is reported with the server's reason,
// never with the password.
func TestWrongPasswordIsReported(t *testing.T) {
	servers := redistest.StartT(t, 1, redistest.Options{})
	admin := servers[0].NewClient()
	defer admin.Close()
	if err := admin.ConfigSet(t.Context(), "requirepass", "right-Pa55").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: servers[0].Addr, Password: "wr0ng-Pa55", MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	l := newLocker(t, []redis.UniversalClient{c})
	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("TryObtain with a wrong password: %v; want ErrNoQuorum with the server's WRONGPASS", err)
	}
	if strings.Contains(err.Error(), "Pa55") {
		t.Fatalf("error shows a password: %v", err)
	}
}
