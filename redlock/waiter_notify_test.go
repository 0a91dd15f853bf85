package redlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// refusingClients are clients of c's servers whose new connections can be
// refused for a while, as when a node's network drops new connections: the
// connections they have keep working.
type refusingClients struct {
	clients []*redis.Client
	refuse  atomic.Bool
	mu      sync.Mutex
	refused map[string]int // dials refused, by address
}

func newRefusingClients(t *testing.T, c *cluster) *refusingClients {
	t.Helper()
	r := &refusingClients{refused: map[string]int{}}
	r.clients = dialClients(t, c.servers, func(_ context.Context, addr string) error {
		if r.refuse.Load() {
			r.mu.Lock()
			r.refused[addr]++
			r.mu.Unlock()
			return errors.New("connection refused by the test")
		}
		return nil
	})
	return r
}

// refusedEverywhere waits, up to 10s, for a dial to each server to have
// been refused since the last call, and fails the test if not.
func (r *refusingClients) refusedEverywhere(t *testing.T, c *cluster) {
	t.Helper()
	if !poll(t, 10*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, s := range c.servers {
			if r.refused[s.Addr] == 0 {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("no dial refused on every node: %v", r.refused)
	}
	r.mu.Lock()
	clear(r.refused)
	r.mu.Unlock()
}

// releaseWhileRefused waits for a dial to each node to have been refused,
// releases held, lets dials through again, and fails the test unless the
// waiter (got) gets the lock soon after.
func (r *refusingClients) releaseWhileRefused(t *testing.T, c *cluster, held *redlock.Lock, got <-chan error) {
	t.Helper()
	r.refusedEverywhere(t, c)
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	r.refuse.Store(false)
	wokenSoon(t, got, released)
}

// subscribers returns the number of subscribers of key's release channel on
// each node.
func (c *cluster) subscribers(t *testing.T, key string) []int64 {
	t.Helper()
	out := make([]int64, len(c.clients))
	for i, cl := range c.clients {
		n, err := cl.PubSubNumSub(t.Context(), redlock.ReservedPrefix+"released:"+key).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = n[redlock.ReservedPrefix+"released:"+key]
	}
	return out
}

// lateWaiter starts a waiter for key, held by another Locker for 10s,
// whose retry timer is a minute: only a release announcement, or the
// holder's expiry, can wake it. It returns the holder's lock and the
// waiter's outcome.
func lateWaiter(t *testing.T, c *cluster, l *redlock.Locker, key string) (*redlock.Lock, <-chan error) {
	t.Helper()
	held := mustObtain(t, c.locker(t), key)
	return held, waiter(t, l, key)
}

// waiter starts an Obtain of key on l whose retry timer is a minute (only a
// release announcement, a late grant or the holder's expiry can wake it),
// releasing what it gets. It returns its outcome.
func waiter(t *testing.T, l *redlock.Locker, key string) <-chan error {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		lock, err := l.Obtain(redistest.BoundedCtx(t), key, redlock.WithRetry(redlock.LinearBackoff(time.Minute)))
		if err == nil {
			err = lock.Release(context.Background())
		}
		got <- err
	}()
	return got
}

// wokenSoon fails the test unless the waiter got the lock within 6s of its
// release (the holder's TTL is 10s; a loaded machine may take seconds).
func wokenSoon(t *testing.T, got <-chan error, released time.Time) {
	t.Helper()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d > 6*time.Second {
			t.Fatalf("the waiter got the lock %v after its release; the holder's TTL was 10s", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter never got the lock")
	}
}

// A waiter whose subscription comes up only after the release it waits
// for (its node's connection was still being made) tries again when the
// subscription becomes active, instead of sleeping until the holder's
// expiry. It used to: the release was announced to no one.
func TestWaiterSubscribedLateTriesAgain(t *testing.T) {
	c := newCluster(t, 3)
	r := newRefusingClients(t, c)
	l := newLocker(t, r.clients)
	// The workers' connections are made; the subscriptions' are not.
	for _, key := range []string{"warm-a", "warm-b", "warm-c", "warm-d"} {
		if err := mustObtain(t, l, key).Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	r.refuse.Store(true)
	held, got := lateWaiter(t, c, l, "late")
	// The waiter found the lock held and tried to subscribe.
	r.releaseWhileRefused(t, c, held, got)
}

// The same when a waiter's subscription breaks and comes back: go-redis
// subscribes again on a new connection, and releases in between went
// unannounced.
func TestWaiterResubscribedTriesAgain(t *testing.T) {
	c := newCluster(t, 3)
	r := newRefusingClients(t, c)
	l := newLocker(t, r.clients)
	held, got := lateWaiter(t, c, l, "broken")
	c.subscribedEverywhere(t, "broken")
	r.refuse.Store(true)
	for i, cl := range c.clients {
		if err := cl.ClientKillByFilter(t.Context(), "TYPE", "pubsub").Err(); err != nil {
			t.Fatalf("CLIENT KILL on node %d: %v", i, err)
		}
	}
	// The subscriptions are gone, and their reconnections refused.
	r.releaseWhileRefused(t, c, held, got)
}

// Nodes whose connections take longer to come up than the node timeout
// still wake waiters: the subscription's connection gets the time the
// workers' get (see TestSlowConnectionSetUpStillVotes).
func TestSlowConnectionSetUpStillWakes(t *testing.T) {
	c := newCluster(t, 3)
	const slow, timeout = 150 * time.Millisecond, 50 * time.Millisecond
	l := newLocker(t, dialClients(t, c.servers, slowDial(slow)), redlock.WithNodeTimeout(timeout))
	// The workers' connections come up first: the waiter must find the
	// lock held, not its nodes silent.
	if !poll(t, 10*time.Second, func() bool {
		lock, err := l.TryObtain(t.Context(), "warm")
		return err == nil && lock.Release(t.Context()) == nil
	}) {
		t.Fatal("no lock in 10s")
	}
	held, got := lateWaiter(t, c, l, "far")
	c.subscribedEverywhere(t, "far")
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wokenSoon(t, got, time.Now())
}

// Close does not wait for a subscription's connection that never comes up
// (a node whose network drops new connections). go-redis dials it holding
// the subscription's lock, which Close needs, and that dial had no bound:
// Close waited as long as the dial did.
func TestCloseEndsHungSubscriptionDial(t *testing.T) {
	c := newCluster(t, 3)
	var hang atomic.Bool
	unhang := make(chan struct{})
	t.Cleanup(func() { close(unhang) })
	clients := dialClients(t, c.servers, func(ctx context.Context, _ string) error {
		if hang.Load() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-unhang:
				return errors.New("the test ended")
			}
		}
		return nil
	})
	l, err := redlock.New(clients, testOpts...)
	if err != nil {
		t.Fatal(err)
	}
	// The worker that sends the key's calls has its connections.
	if err := mustObtain(t, l, "hung").Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	hang.Store(true)
	held := mustObtain(t, c.locker(t), "hung")
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	// It waits, subscribing: the dial hangs.
	if _, err := l.Obtain(ctx, "hung"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("Obtain of a held lock: %v, want ErrNotObtained", err)
	}
	closed := make(chan error, 1)
	began := time.Now()
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits after 10s for a dial that hangs")
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("Close took %v with a dial that hangs", d)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
