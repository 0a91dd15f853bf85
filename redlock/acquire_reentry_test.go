package redlock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

// requireHeldUntil fails unless key lives on every node about as long as
// lock's local deadline says, or longer (or has no expiry): nothing
// shortened the hold that lock counts on. About: on a loaded machine the
// servers' expiries were seen to run up to a few hundred milliseconds ahead
// of our clock, beyond the drift margin; the shortenings this catches leave
// far less than the slack.
func requireHeldUntil(t *testing.T, c *cluster, key string, lock *redlock.Lock) {
	t.Helper()
	const slack = time.Second
	for i, cl := range c.clients {
		// Read the deadline first: the key's PTTL can only have shrunk by
		// the time it is read, never the other way round.
		want := time.Until(lock.Until()) - slack
		pttl, err := cl.PTTL(t.Context(), key).Result()
		if err != nil {
			t.Fatalf("PTTL on node %d: %v", i, err)
		}
		if pttl != -1 && pttl < want {
			t.Fatalf("node %d holds %q for %v more, but the outer lock counts on %v", i, key, pttl, want+slack)
		}
	}
}

// A Lock that shares a token with another never shortens the keys' TTL
// below the other's deadline: not by a shorter re-entry, a shorter Extend,
// or a short KeepAlive that stops.
func TestReentryNeverShortensHold(t *testing.T) {
	short := []redlock.LockOption{redlock.WithTTL(600 * time.Millisecond), redlock.WithNodeTimeout(200 * time.Millisecond)}
	tests := []struct {
		name string
		// inner re-enters the outer lock through l (another Locker: a second
		// process reclaiming by token) and lets go of it again.
		inner func(t *testing.T, l *redlock.Locker, outer *redlock.Lock)
	}{
		{"re-entry with a shorter TTL", func(t *testing.T, l *redlock.Locker, outer *redlock.Lock) {
			start := time.Now()
			in := mustObtain(t, l, outer.Key(), append(short, redlock.WithToken(outer.Token()))...)
			// The inner Lock's own deadline stays conservative: from its TTL.
			if in.Until().After(start.Add(600 * time.Millisecond)) {
				t.Fatalf("inner Until %v after start, beyond its own 600ms TTL", in.Until().Sub(start))
			}
			if err := in.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"Extend with a shorter TTL", func(t *testing.T, l *redlock.Locker, outer *redlock.Lock) {
			in := mustObtain(t, l, outer.Key(), redlock.WithToken(outer.Token()), redlock.WithNodeTimeout(200*time.Millisecond))
			start := time.Now()
			if err := in.Extend(t.Context(), 600*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if in.Until().After(start.Add(600 * time.Millisecond)) {
				t.Fatalf("inner Until %v after Extend, beyond the 600ms asked for", in.Until().Sub(start))
			}
			if err := in.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}},
		{"KeepAlive of a short re-entry that stops", func(t *testing.T, l *redlock.Locker, outer *redlock.Lock) {
			in := mustObtain(t, l, outer.Key(), append(short, redlock.WithToken(outer.Token()))...)
			first := in.Until()
			_, stop := in.KeepAlive(t.Context())
			defer stop()
			// Await one extension: it moves the inner deadline.
			deadline := time.Now().Add(10 * time.Second)
			for !in.Until().After(first) {
				if time.Now().After(deadline) {
					t.Fatal("KeepAlive never extended the inner lock")
				}
				time.Sleep(5 * time.Millisecond)
			}
			stop()
		}},
	}
	c := newCluster(t, 3)
	l := c.locker(t)
	other := c.locker(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprint("r", i)
			outer := mustObtain(t, l, key) // 10s TTL
			t.Cleanup(func() { _ = outer.Release(t.Context()) })
			// Every node's PTTL is checked below: wait for the last
			// node's grant, which the majority did not wait for.
			c.heldEverywhere(t, key, outer.Token())
			tt.inner(t, other, outer)
			requireHeldUntil(t, c, key, outer)
			if !outer.Valid() {
				t.Fatal("outer lock invalid")
			}
			// The symptom: a third client got the key while the outer was
			// valid, once the inner's short TTL had run out.
			third := c.locker(t)
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				// (An outage error under load would not be the symptom.)
				if _, err := third.TryObtain(t.Context(), key); err == nil {
					t.Fatalf("a third client obtained the key while the outer is valid (%v left)", time.Until(outer.Until()))
				}
				time.Sleep(50 * time.Millisecond)
			}
			requireHeldUntil(t, c, key, outer)
		})
	}
}

// A key without expiry stays without expiry through re-entry and Extend.
func TestReentryKeepsNoExpiry(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	const token = "forever"
	for _, cl := range c.clients {
		if err := cl.Set(t.Context(), "n", token+"\x001\x00", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	in := mustObtain(t, l, "n", redlock.WithToken(token), redlock.WithTTL(time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	if err := in.Extend(t.Context(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	for i, cl := range c.clients {
		if pttl, err := cl.PTTL(t.Context(), "n").Result(); err != nil || pttl != -1 {
			t.Fatalf("node %d: PTTL %v, %v; want -1 (no expiry)", i, pttl, err)
		}
	}
	if ttl, err := in.TTL(t.Context()); err != nil || ttl != -1 {
		t.Fatalf("TTL = %v, %v; want -1", ttl, err)
	}
	if err := in.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := c.holders(t, "n", token); n != 3 {
		t.Fatalf("the outer hold is on %d nodes after the inner release, want 3", n)
	}
}

// With fencing, a re-entered lock's fence is never below the outer lock's:
// it is read from the counters, which never go back. A node that granted the
// outer only after the decision counted past its fence and keeps that count,
// so a re-entry that node grants has that higher fence; when the nodes that
// grant the re-entry include one that lost the key, that node grants it as
// to a new holder and the re-entry's fence is higher too (as Lock.Fence
// says).
func TestReentryFence(t *testing.T) {
	tests := []struct {
		name string
		// prepare acts on the nodes after the outer's acquisition (and its
		// fence write-back) and before the re-entry.
		prepare func(t *testing.T, c *cluster, key string, outer *redlock.Lock)
		// other re-enters from another Locker, a second process, whose
		// node 0 answers late: node 2 is then among the granting majority.
		other bool
		// higher is set when the re-entry's fence must exceed the outer's.
		higher bool
	}{
		{name: "same Locker"},
		{name: "another Locker", other: true},
		{name: "a node missed the outer's write-back", prepare: func(t *testing.T, c *cluster, key string, outer *redlock.Lock) {
			// As if the write-back had not reached node 2: its counter is
			// what its own grant gave, below the outer's fence.
			if err := c.clients[2].Set(t.Context(), "redlock:fence:"+key, outer.Fence()-1000, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		// Every majority that grants the re-entry has a node that grants it
		// as to a new holder (one node alone may or may not be among the
		// first majority to answer).
		{name: "a majority lost the key", higher: true, prepare: func(t *testing.T, c *cluster, key string, _ *redlock.Lock) {
			for _, cl := range c.clients[1:] {
				if err := cl.Del(t.Context(), key).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	c := newCluster(t, 3)
	other := c.locker(t, redlock.WithFencing())
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprint("fence", i)
			// Node 2 answers the outer's acquisition only after the
			// decision: its grant then counts past the outer's fence
			// (its clock has moved on), and its write-back comes after.
			slow := gatedWire(t, c.servers[2])
			l := newLocker(t, []*redis.Client{c.clients[0], c.clients[1], slow.Client}, redlock.WithFencing(), redlock.WithNodeTimeout(5*time.Second))
			t.Cleanup(slow.open) // before the Locker's Close, even on failure
			outer := mustObtain(t, l, key)
			slow.open()
			// Every node has the outer's fence written back: Inspect waits
			// for every node, behind the write-back.
			st, err := l.Inspect(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			for n, ns := range st.Nodes {
				if ns.Fence < outer.Fence() {
					t.Errorf("node %d counter %d after the write-back, below the outer's fence %d", n, ns.Fence, outer.Fence())
				}
			}
			if tt.prepare != nil {
				tt.prepare(t, c, key, outer)
			}
			by := l
			if tt.other {
				late := gatedWire(t, c.servers[0])
				by = newLocker(t, []*redis.Client{late.Client, c.clients[1], c.clients[2]}, redlock.WithFencing(), redlock.WithNodeTimeout(5*time.Second))
				t.Cleanup(late.open)
			}
			in := mustObtain(t, by, key, redlock.WithToken(outer.Token()))
			switch {
			case tt.higher && in.Fence() <= outer.Fence():
				t.Fatalf("re-entry fence %d, want above the outer's %d", in.Fence(), outer.Fence())
			case in.Fence() < outer.Fence():
				t.Fatalf("re-entry fence %d, below the outer's %d", in.Fence(), outer.Fence())
			}
			// A re-entry of the re-entry has at least its fence.
			again := mustObtain(t, l, key, redlock.WithToken(outer.Token()))
			if again.Fence() < in.Fence() {
				t.Fatalf("second re-entry fence %d, below the first's %d", again.Fence(), in.Fence())
			}
			for _, lock := range []*redlock.Lock{again, in} {
				if err := lock.Release(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			// Where a majority lost the outer's hold, the re-entry's last
			// release took the key: the outer's release finds it expired.
			if err := outer.Release(t.Context()); err != nil && !(tt.higher && errors.Is(err, redlock.ErrLockExpired)) {
				t.Fatal(err)
			}
			// The next holder's fence is above every fence of the token.
			next := mustObtain(t, other, key)
			if next.Fence() <= in.Fence() {
				t.Fatalf("next holder's fence %d, not above the re-entry's %d", next.Fence(), in.Fence())
			}
			if err := next.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestReentryCountsHolds(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	first := mustObtain(t, l, "r", redlock.WithMetadata("m"))
	second := mustObtain(t, l, "r", redlock.WithToken(first.Token()))
	if second.Token() != first.Token() {
		t.Fatal("re-entry changed the token")
	}
	settledHolds(t, l, "r", 2)
	st, err := l.Inspect(t.Context(), "r")
	if err != nil || st.Holder != first.Token() || st.Nodes[0].Holds != 2 || st.Nodes[0].Metadata != "m" {
		t.Fatalf("Inspect = %+v, %v; want 2 holds of our token", st, err)
	}
	if _, err := l.TryObtain(t.Context(), "r", redlock.WithToken("someone-else")); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("another token: %v, want ErrNotObtained", err)
	}
	if err := second.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryObtain(t.Context(), "r"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("after one of two releases the key must stay held, got %v", err)
	}
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	free := mustObtain(t, l, "r")
	if err := free.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
