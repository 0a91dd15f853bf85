package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// Many goroutines on several Lockers take random overlapping key sets, each
// set in a random order: every one finishes (no deadlock), and no key is
// ever held by two of them at once.
func TestObtainMultiOverlappingNoDeadlock(t *testing.T) {
	c := newCluster(t, 3)
	lockers := []*redlock.Locker{c.locker(t), c.locker(t), c.locker(t)}
	const workers, rounds, keys = 12, 6, 5
	var (
		holders [keys]atomic.Int32
		wg      sync.WaitGroup
		done    atomic.Int32
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for w := range workers {
		l := lockers[w%len(lockers)]
		wg.Go(func() {
			for range rounds {
				set := rand.Perm(keys)[:2+rand.IntN(keys-1)]
				names := make([]string, len(set))
				for i, k := range set {
					names[i] = fmt.Sprint("m", k)
				}
				lock, err := l.ObtainMulti(ctx, names, redlock.WithRetry(redlock.ExponentialBackoff(time.Millisecond, 50*time.Millisecond)))
				if err != nil {
					t.Errorf("worker %d, keys %v: %v", w, names, err)
					return
				}
				for _, k := range set {
					if n := holders[k].Add(1); n != 1 {
						t.Errorf("key m%d held %d times", k, n)
					}
				}
				if got := lock.Keys(); strings.Join(got, ",") != strings.Join(names, ",") || lock.Key() != strings.Join(names, ",") {
					t.Errorf("Keys %v, Key %q, want %v", got, lock.Key(), names)
				}
				for _, k := range set {
					holders[k].Add(-1)
				}
				if err := lock.Release(t.Context()); err != nil {
					t.Error(err)
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if n := done.Load(); n != workers*rounds {
		t.Fatalf("%d of %d multi-key locks done", n, workers*rounds)
	}
	// A failed attempt's grant that came late is undone in the
	// background, perhaps after the last Release returned.
	names := make([]string, keys)
	for k := range names {
		names[k] = fmt.Sprint("m", k)
	}
	c.assertNone(t, names...)
}

// assertNone fails if any of keys stays on any node: a node that answered
// after its round was decided is cleaned up in the background, as its reply
// arrives, so this waits a little for that.
func (c *cluster) assertNone(t *testing.T, keys ...string) {
	t.Helper()
	err := redistest.Eventually(t, 5*time.Second, func() error {
		for _, k := range keys {
			for i, v := range c.values(t, k) {
				if v != "" {
					return fmt.Errorf("key %q left on node %d: %q", k, i, v)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// A key held elsewhere on a majority: the multi-key lock fails as
// contention, and the node that granted every key has none left.
func TestObtainMultiKeyHeldElsewhereLeavesNothing(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	// b is held on nodes 0 and 1 only: node 2 grants all three keys.
	for _, cl := range c.clients[:2] {
		if err := cl.Set(t.Context(), "b", "other\x001\x00", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := l.TryObtainMulti(t.Context(), []string{"a", "b", "c"})
	if !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryObtainMulti: %v, want ErrNotObtained", err)
	}
	c.assertNone(t, "a", "c")
	// The undo on node 2 may still be on its way when the call returns.
	if !poll(t, 10*time.Second, func() bool { return c.value(t, 2, "b") == "" }) {
		t.Errorf("b left on node 2: %q", c.value(t, 2, "b"))
	}
	// The waiting ObtainMulti wakes at the release of b.
	got := make(chan error, 1)
	go func() {
		lock, err := l.ObtainMulti(t.Context(), []string{"c", "b", "a"}, redlock.WithRetry(redlock.LinearBackoff(time.Minute)))
		if err == nil {
			err = lock.Release(t.Context())
		}
		got <- err
	}()
	c.subscribed(t, "b", 1)
	start := time.Now()
	other := mustObtain(t, c.locker(t), "x") // unrelated, to hold a token
	_ = other.Release(t.Context())
	for _, cl := range c.clients[:2] {
		// What a release does: delete, then announce.
		if err := cl.Del(t.Context(), "b").Err(); err != nil {
			t.Fatal(err)
		}
		if err := cl.Publish(t.Context(), "redlock:released:b", "b").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("ObtainMulti took %v after the release, retrying every minute: it did not wake", d)
	}
	c.assertNone(t, "a", "b", "c")
}

// With a majority of nodes down the multi-key lock fails as an outage and
// leaves no key on the node that is up; with a minority down it is held on
// the others and released from all.
func TestObtainMultiNodeDownLeavesNothing(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithNodeTimeout(200*time.Millisecond))
	if err := c.servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	lock, err := l.TryObtainMulti(t.Context(), []string{"a", "b"})
	if err != nil {
		t.Fatalf("with one node of three down: %v", err)
	}
	for _, i := range []int{1, 2} {
		if c.value(t, i, "a") == "" || c.value(t, i, "b") == "" {
			t.Errorf("node %d lacks a key of the lock", i)
		}
	}
	if ttl, err := lock.TTL(t.Context()); err != nil || ttl <= 0 {
		t.Errorf("TTL: %v, %v", ttl, err)
	}
	if err := lock.Extend(t.Context(), 20*time.Second); err != nil {
		t.Errorf("Extend: %v", err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	_, err = l.TryObtainMulti(t.Context(), []string{"a", "b"})
	if !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("with two of three down: %v, want ErrNoQuorum", err)
	}
	for _, k := range []string{"a", "b"} {
		err = redistest.Eventually(t, 5*time.Second, func() error {
			if v := c.value(t, 2, k); v != "" {
				return fmt.Errorf("%s left on the node that is up: %q", k, v)
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
}

// Release, Extend and TTL of a multi-key lock act on every key; one key
// taken away makes the whole lock not held.
func TestMultiLockActsOnAllKeys(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithTTL(5*time.Second))
	lock, err := l.TryObtainMulti(t.Context(), []string{"a", "b", "c"}, redlock.WithMetadata("transfer 7"))
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Extend(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// A majority of nodes had every key, and extended each (on a loaded
	// machine a node may have missed the acquisition).
	for _, k := range []string{"a", "b", "c"} {
		long := 0
		for i := range c.clients {
			if pttlOf(t, c, i, k) > 20*time.Second {
				long++
			}
		}
		if long < 2 {
			t.Errorf("%s has more than 20s left on %d nodes after Extend(30s)", k, long)
		}
	}
	// Shorten one key behind the lock's back: TTL is the shortest.
	for _, cl := range c.clients {
		if err := cl.PExpire(t.Context(), "b", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if ttl, err := lock.TTL(t.Context()); err != nil || ttl > 10*time.Second {
		t.Errorf("TTL %v, %v; want at most the shortest key's 10s", ttl, err)
	}
	// Take one key away and give it to another owner.
	for _, cl := range c.clients {
		if err := cl.Set(t.Context(), "c", "thief\x001\x00", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := lock.Extend(t.Context(), 30*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend with c taken: %v, want ErrLockLost", err)
	}
	if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Release with c taken: %v, want ErrLockLost", err)
	}
	// Release still let go of the keys that were ours, and left c.
	c.assertNone(t, "a", "b")
	if v := c.value(t, 0, "c"); !strings.HasPrefix(v, "thief") {
		t.Errorf("c is %q, want the thief's", v)
	}
}

func pttlOf(t *testing.T, c *cluster, i int, key string) time.Duration {
	t.Helper()
	d, err := c.clients[i].PTTL(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A multi-key lock kept alive by KeepAlive stays held past its TTL on every
// key, and a cooldown keeps every key.
func TestMultiLockKeepAliveAndCooldown(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithTTL(1500*time.Millisecond), redlock.WithNodeTimeout(300*time.Millisecond))
	lock, err := l.TryObtainMulti(t.Context(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	held, stop := lock.KeepAlive(t.Context())
	select {
	case <-held.Done():
		t.Fatalf("lost: %v", context.Cause(held))
	case <-time.After(2 * time.Second): // past the TTL
	}
	stop()
	if !lock.Valid() {
		t.Fatal("not valid after KeepAlive")
	}
	if err := lock.ReleaseAfter(t.Context(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryObtainMulti(t.Context(), []string{"b", "c"}); !errors.Is(err, redlock.ErrNotObtained) {
		t.Errorf("during the cooldown: %v, want ErrNotObtained", err)
	}
	c.assertNone(t, "c")
}

func TestObtainMultiRefusesBadInput(t *testing.T) {
	c := newCluster(t, 1)
	l := c.locker(t)
	many := make([]string, redlock.MaxMultiKeys+1)
	for i := range many {
		many[i] = fmt.Sprint("k", i)
	}
	for _, tc := range []struct {
		name string
		keys []string
		opts []redlock.LockOption
	}{
		{"no keys", nil, nil},
		{"empty key", []string{"a", ""}, nil},
		{"duplicate", []string{"a", "b", "a"}, nil},
		{"reserved", []string{"a", "redlock:guard:marker"}, nil},
		{"too many", many, nil},
		{"token", []string{"a", "b"}, []redlock.LockOption{redlock.WithToken("t")}},
		{"fencing", []string{"a", "b"}, []redlock.LockOption{redlock.WithFencing()}},
		{"bad TTL", []string{"a", "b"}, []redlock.LockOption{redlock.WithTTL(-1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := l.TryObtainMulti(t.Context(), tc.keys, tc.opts...); !errors.Is(err, redlock.ErrInvalid) {
				t.Errorf("TryObtainMulti: %v, want ErrInvalid", err)
			}
			if _, err := l.ObtainMulti(t.Context(), tc.keys, tc.opts...); !errors.Is(err, redlock.ErrInvalid) {
				t.Errorf("ObtainMulti: %v, want ErrInvalid", err)
			}
		})
	}
	if lock, err := l.TryObtainMulti(t.Context(), many[:redlock.MaxMultiKeys]); err != nil {
		t.Errorf("MaxMultiKeys keys: %v", err)
	} else if err := lock.Release(t.Context()); err != nil {
		t.Error(err)
	}
}

// Under the restart guard, a multi-key lock is refused by a node that lost
// its memory, and that node keeps none of the keys.
func TestObtainMultiRestartGuard(t *testing.T) {
	c := newCluster(t, 3)
	l := c.bootstrapped(t)
	for _, s := range c.servers[:2] {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	// The first call may find the old connections broken (EOF).
	err := redistest.Eventually(t, 5*time.Second, func() error {
		_, err := l.TryObtainMulti(t.Context(), []string{"a", "b"})
		if err == nil || !strings.Contains(err.Error(), "it lost its memory") {
			return fmt.Errorf("with two restarted nodes: %v, want them to abstain", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c.assertNone(t, "a", "b")
}

// A multi-key lock is named by its keys joined with commas, which may also
// be a single key's name: its Release must not hand that key over to a
// goroutine of the same Locker waiting in line for it.
func TestMultiLockReleaseIsNoHandoff(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	single := mustObtain(t, c.locker(t), "a,b") // held elsewhere
	waited := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_, err := l.Obtain(ctx, "a,b", redlock.WithRetry(redlock.LinearBackoff(time.Hour)))
		waited <- err
	}()
	multi, err := l.TryObtainMulti(t.Context(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := redistest.Eventually(t, 10*time.Second, func() error {
		if !redlock.Offered(l, "a,b") {
			return errors.New("the waiter has not offered itself for a handoff")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := multi.Release(t.Context()); err != nil {
		t.Errorf("Release of the multi-key lock: %v", err)
	}
	c.assertNone(t, "a", "b")
	cancel()
	if err := <-waited; err == nil {
		t.Error("the waiter got a lock that another Locker holds")
	}
	if err := single.Release(t.Context()); err != nil {
		t.Error(err)
	}
}

// Goroutines of one Locker that want the same keys, given in any order,
// line up and take turns, as Obtain's do for one key: each gets the lock
// after the one before it let go, woken by that release, not by the end of
// its TTL or a retry timer.
func TestObtainMultiWaitersTakeTurns(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	keys := []string{"a", "b"}
	held, err := l.TryObtainMulti(t.Context(), keys, redlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i, ks := range [][]string{{"b", "a"}, {"a", "b"}, {"b", "a"}, {"a", "b"}} {
		wg.Go(func() {
			lock, err := l.ObtainMulti(ctx, ks, redlock.WithTTL(time.Minute), redlock.WithRetry(redlock.LinearBackoff(time.Hour)))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := lock.Release(context.Background()); err != nil {
				t.Error(err)
			}
		})
		awaitMultiLine(t, l, keys, i+1)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(order) != 4 || order[0] != 0 || order[1] != 1 || order[2] != 2 || order[3] != 3 {
		t.Fatalf("acquisition order %v, want 0 1 2 3", order)
	}
	if n := redlock.MultiLineLen(l, keys); n != 0 {
		t.Fatalf("line left with %d waiters", n)
	}
	c.assertNone(t, "a", "b")
}

// awaitMultiLine waits until n goroutines of l wait in line for keys.
func awaitMultiLine(t *testing.T, l *redlock.Locker, keys []string, n int) {
	t.Helper()
	if err := redistest.Eventually(t, 10*time.Second, func() error {
		if got := redlock.MultiLineLen(l, keys); got != n {
			return fmt.Errorf("line for %v has %d waiters, want %d", keys, got, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Calls on one key set, whatever the order of its keys, reach each node in
// the order they were made: an attempt on [b a] right after the
// acquisition of [a b] waits on a node behind that acquisition, and is
// refused there, instead of taking the keys first. It used to go on
// another queue (its first key's) and overtake: the node granted it, and
// its grant, undone late, could refuse the next acquisition after the
// release (ExampleLocker_ObtainMulti failed so, now and then, in make test).
//
// Node 1 is held up too, from after the first acquisition, and the attempt
// waits long for nodes: so the attempt is still open when node 2 gets to
// it (a failed attempt's calls are no longer sent at all).
func TestMultiKeyCallsKeepTheirOrder(t *testing.T) {
	c := newCluster(t, 3)
	var a, b string
	for i := 0; a == ""; i++ {
		// Two keys, a < b, whose own queues differ.
		x, y := fmt.Sprintf("order-a%d", i), fmt.Sprintf("order-b%d", i)
		if !redlock.SameQueue(x, y) {
			a, b = x, y
		}
	}
	answers := make(chan redlock.NodeEvent, 16)
	l := c.locker(t, redlock.WithObserver(nodeAnswers{key: b + "," + a, ch: answers}))
	// Node 2 takes a while to get to the calls queued on a's queue.
	letGo := sync.OnceFunc(redlock.HoldQueue(l, 2, a))
	t.Cleanup(letGo)
	lock, err := l.ObtainMulti(t.Context(), []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	letGo1 := sync.OnceFunc(redlock.HoldQueue(l, 1, a))
	t.Cleanup(letGo1)
	tried := make(chan error, 1)
	go func() {
		_, err := l.TryObtainMulti(t.Context(), []string{b, a}, redlock.WithNodeTimeout(3*time.Second))
		tried <- err
	}()
	letGo()
	timeout := time.After(10 * time.Second)
	for answered := false; !answered; {
		select {
		case e := <-answers:
			if answered = e.Node == 2; answered && e.Outcome != redlock.OutcomeHeldByOther {
				t.Fatalf("node 2 answered the attempt on [%s %s] with %v, want held by another: it overtook the acquisition of [%s %s]", b, a, e.Outcome, a, b)
			}
		case <-timeout:
			t.Fatal("node 2 never answered the attempt")
		}
	}
	letGo1()
	if err := <-tried; !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryObtainMulti of held keys in the other order: %v, want ErrNotObtained", err)
	}
	c.heldEverywhere(t, a, lock.Token())
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	other, err := l.TryObtainMulti(t.Context(), []string{b, a})
	if err != nil {
		t.Fatalf("TryObtainMulti after the release: %v", err)
	}
	if err := other.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
