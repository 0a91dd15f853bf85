package redlock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// newLoggedCluster is newCluster with every command in the servers' slow
// logs, so that a test can see what reached them (sentArgs).
func newLoggedCluster(t *testing.T, n int) *cluster {
	t.Helper()
	servers := redistest.StartT(t, n, redistest.Options{Args: []string{"--slowlog-log-slower-than", "0", "--slowlog-max-len", "100000"}})
	return &cluster{servers: servers, clients: redistest.ClientsT(t, servers)}
}

// scriptCalls is how many scripts naming key the cluster's nodes have run.
func (c *cluster) scriptCalls(t *testing.T, key string) int {
	t.Helper()
	total := 0
	for _, cl := range c.clients {
		total += len(sentArgs(t, cl, key))
	}
	return total
}

// settled waits until every node has run what was sent for key before:
// Inspect waits for every node, and its script queues behind those calls.
// It returns the scripts run for key by then, Inspect's own included.
func (c *cluster) settled(t *testing.T, l *redlock.Locker, key string) int {
	t.Helper()
	if _, err := l.Inspect(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	return c.scriptCalls(t, key)
}

// checkReleased reports an error unless err says the handle was released
// before; the test goes on, to show what the call did on the nodes.
func checkReleased(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case !errors.Is(err, redlock.ErrReleased) || !errors.Is(err, redlock.ErrLockNotHeld):
		t.Errorf("%s: %v, want ErrReleased under ErrLockNotHeld", what, err)
	case strings.Contains(err.Error(), "\n"):
		t.Errorf("%s: error spans lines: %q", what, err)
	}
}

// A handle releases once: a second Release or ReleaseAfter, in any order,
// fails with ErrReleased without sending anything, so the outer hold of a
// re-entered lock survives it.
func TestReleaseOncePerHandle(t *testing.T) {
	release := func(l *redlock.Lock) error { return l.Release(t.Context()) }
	after := func(l *redlock.Lock) error { return l.ReleaseAfter(t.Context(), time.Second) }
	tests := []struct {
		name          string
		first, second func(*redlock.Lock) error
	}{
		{"Release twice", release, release},
		{"Release after ReleaseAfter", after, release},
		{"ReleaseAfter after Release", release, after},
		{"ReleaseAfter twice", after, after},
	}
	c := newLoggedCluster(t, 3)
	l := c.locker(t)
	third := c.locker(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprint("once", i)
			outer := mustObtain(t, l, key)
			t.Cleanup(func() { _ = outer.Release(t.Context()) })
			inner := mustObtain(t, l, key, redlock.WithToken(outer.Token()))
			if err := tt.first(inner); err != nil {
				t.Fatal(err)
			}
			before := c.settled(t, l, key)
			checkReleased(t, "second release", tt.second(inner))
			// Only the settling Inspect's 3 scripts, none of the release's.
			if got := c.settled(t, l, key) - before; got != 3 {
				t.Errorf("the nodes ran %d scripts for the second release and an Inspect, want the Inspect's 3", got)
			}
			st, err := l.Inspect(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			for n, ns := range st.Nodes {
				if ns.Token != outer.Token() || ns.Holds != 1 {
					t.Fatalf("node %d: %+v, want the outer's one hold", n, ns)
				}
			}
			requireHeldUntil(t, c, key, outer) // not cut to a cooldown
			if _, err := third.TryObtain(t.Context(), key); !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("another client while the outer holds the key: %v", err)
			}
			if !outer.Valid() {
				t.Fatal("outer lock invalid")
			}
		})
	}
}

// After Release or ReleaseAfter, Extend and TTL fail with ErrReleased without
// asking the servers: a cooldown left on the nodes is not the handle's.
func TestExtendAndTTLAfterReleaseFail(t *testing.T) {
	tests := []struct {
		name    string
		release func(*redlock.Lock) error
		left    bool // whether the key stays, as a cooldown
	}{
		{"Release", func(l *redlock.Lock) error { return l.Release(t.Context()) }, false},
		{"ReleaseAfter", func(l *redlock.Lock) error { return l.ReleaseAfter(t.Context(), 2*time.Second) }, true},
	}
	c := newLoggedCluster(t, 3)
	l := c.locker(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprint("ext", i)
			lock := mustObtain(t, l, key)
			if err := tt.release(lock); err != nil {
				t.Fatal(err)
			}
			before := c.settled(t, l, key)
			checkReleased(t, "Extend", lock.Extend(t.Context(), 10*time.Second))
			if _, err := lock.TTL(t.Context()); err != nil {
				checkReleased(t, "TTL", err)
			} else {
				t.Error("TTL succeeded after the release")
			}
			if got := c.settled(t, l, key) - before; got != 3 {
				t.Errorf("the nodes ran %d scripts for Extend, TTL and an Inspect, want the Inspect's 3", got)
			}
			if lock.Valid() {
				t.Fatal("released lock valid")
			}
			for n, cl := range c.clients {
				pttl, err := cl.PTTL(t.Context(), key).Result()
				if err != nil {
					t.Fatal(err)
				}
				if tt.left && (pttl <= 0 || pttl > 2*time.Second) {
					t.Fatalf("node %d: cooldown PTTL %v, want at most the 2s asked for", n, pttl)
				}
				if !tt.left && pttl != -2*time.Nanosecond {
					t.Fatalf("node %d: PTTL %v after Release, want the key gone", n, pttl)
				}
			}
		})
	}
}
