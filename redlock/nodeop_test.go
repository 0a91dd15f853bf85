package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// votesAgain checks that node i answers for key through the Locker's own
// connection for it (Inspect uses the same per-key queue as every other
// call), and that a fresh lock on key is then held on every node.
func votesAgain(t *testing.T, c *cluster, l *redlock.Locker, i int, key string) {
	t.Helper()
	ctx := t.Context()
	err := redistest.Eventually(t, 5*time.Second, func() error {
		st, err := l.Inspect(ctx, key)
		if st == nil {
			return err
		}
		return st.Nodes[i].Err
	})
	if err != nil {
		t.Fatalf("node %d never answered again: %v", i, err)
	}
	lock := mustObtain(t, l, key)
	// Inspect waits for every node, behind the acquisition's last call
	// (TryObtain returns at a majority).
	if _, err := l.Inspect(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n := c.holders(t, key, lock.Token()); n != len(c.clients) {
		t.Fatalf("fresh lock held on %d of %d nodes; want all", n, len(c.clients))
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A node that was briefly a replica answers READONLY; once it is a master
// again its vote must count, on the very key whose call saw READONLY.
// go-redis marks such a connection bad and then refuses every command on
// it, so a worker that kept it lost the node for good.
func TestNodeVotesAgainAfterReadOnly(t *testing.T) {
	c := newCluster(t, 3)
	primary := redistest.StartT(t, 1, redistest.Options{})[0]
	l := c.locker(t)
	ctx := t.Context()
	const key = "readonly"
	lock := mustObtain(t, l, key) // the key's worker on node 0 now holds a connection
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}

	makeSyncedReplica(t, c, primary.Addr)
	lock = mustObtain(t, l, key)
	if n := c.holders(t, key, lock.Token()); n != 2 {
		t.Fatalf("lock held on %d nodes while node 0 is a replica; want 2", n)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.clients[0].Do(ctx, "replicaof", "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	votesAgain(t, c, l, 0, key)
}

// A killed and restarted node votes again.
func TestNodeVotesAgainAfterRestart(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	ctx := t.Context()
	const key = "restart"
	lock := mustObtain(t, l, key)
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	lock = mustObtain(t, l, key)
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	votesAgain(t, c, l, 0, key)
}

// forward gives server s a second address, closed at cleanup.
func forward(t *testing.T, s *redistest.Server) string {
	t.Helper()
	return redistest.ForwardT(t, s.Addr).Addr
}

// clientOf returns a client like the test helper's for addr, closed at
// cleanup.
func clientOf(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// One server reached through two addresses is one node: its vote never
// counts twice, and the first operation that hears from both fails with an
// error matching ErrInvalid that names both addresses. Two of the three
// "nodes" below are one server, and the third is down: a majority must be
// out of reach.
func TestOneServerNeverVotesTwice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order func(direct, alias, other *redis.Client) []*redis.Client
	}{
		{"alias second", func(d, a, o *redis.Client) []*redis.Client { return []*redis.Client{d, a, o} }},
		{"alias first", func(d, a, o *redis.Client) []*redis.Client { return []*redis.Client{a, o, d} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := redistest.StartT(t, 2, redistest.Options{})
			direct, other := clientOf(t, servers[0].Addr), clientOf(t, servers[1].Addr)
			aliasAddr := forward(t, servers[0])
			alias := clientOf(t, aliasAddr)
			l := newLocker(t, tc.order(direct, alias, other))
			if err := servers[1].Kill(); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			// Both addresses are contacted in the same round, and again in
			// later ones: none may grant.
			for i := range 5 {
				lock, err := l.TryObtain(ctx, "twice")
				if err == nil {
					_ = lock.Release(ctx)
					t.Fatalf("attempt %d: obtained a lock from one live server (%s, reached also as %s)", i, servers[0].Addr, aliasAddr)
				}
				if i == 0 {
					continue // the first round may end before the second address answered
				}
				if !errors.Is(err, redlock.ErrInvalid) || errors.Is(err, redlock.ErrNoQuorum) {
					t.Fatalf("attempt %d: error %v; want one matching ErrInvalid, not ErrNoQuorum", i, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, servers[0].Addr) || !strings.Contains(msg, aliasAddr) || !strings.Contains(msg, "same server") {
					t.Fatalf("attempt %d: error %q does not name both addresses of the server", i, msg)
				}
			}
		})
	}
}

// holder puts a forwarder in front of server s, for the test to hold up
// requests on, closed at cleanup.
func holder(t *testing.T, s *redistest.Server) *redistest.Forwarder {
	t.Helper()
	return redistest.ForwardT(t, s.Addr)
}

// A release delayed on its way to two of three nodes (held up in the
// network past the node timeout, and past the TTL) must not reach them
// after the owner has obtained the lock again with the same token: it would
// delete the new hold there and leave it on one node of three. The worker
// that timed out replaces its connection, and the new one first has the
// server kill the old one, whose unread input is then discarded.
func TestDelayedReleaseSparesNewHold(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{})
	direct := redistest.ClientsT(t, servers)
	held := []*redistest.Forwarder{holder(t, servers[1]), holder(t, servers[2])}
	clients := []*redis.Client{direct[0], clientOf(t, held[0].Addr), clientOf(t, held[1].Addr)}
	// A node timeout long enough that no call of the first acquisition
	// times out on a loaded machine: a connection replaced then would not
	// be held up below (Hold holds the connections open when it is
	// called).
	const ttl = 2 * time.Second
	l := newLocker(t, clients, redlock.WithNodeTimeout(time.Second), redlock.WithTTL(ttl))
	ctx := t.Context()
	const key = "delayed"

	lock := mustObtain(t, l, key)
	for _, h := range held {
		h.Hold()
	}
	if err := lock.Release(ctx); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Release with two nodes held up: %v; want ErrNoQuorum", err)
	}
	// The old keys expire on the held nodes, so that the next hold is a
	// fresh key (a re-entry would only lose one hold to the stale release).
	if err := redistest.Eventually(t, 10*ttl, func() error {
		for i := 1; i < 3; i++ {
			if n, err := direct[i].Exists(ctx, key).Result(); err != nil || n != 0 {
				return errors.Join(err, errors.New("old key still there"))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	again, err := l.TryObtain(ctx, key, redlock.WithToken(lock.Token()))
	if err != nil {
		t.Fatalf("obtaining again with the same token: %v", err)
	}
	// Every node's acquisition first (TryObtain returns at a majority, and
	// one still on its way would land after a stale release and hide it).
	before, err := l.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range held {
		h.Free() // the stale releases reach their servers, or were dropped
	}
	st, err := l.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// Not one node may lose the new hold: a majority left would hide a
	// stale release that reached one node of two.
	holds := 0
	for i, n := range st.Nodes {
		if had := before.Nodes[i].Held && before.Nodes[i].Token == again.Token(); had && !(n.Held && n.Token == again.Token()) {
			t.Fatalf("after the delayed release arrived, node %d lost the new hold", i)
		}
		if n.Held && n.Token == again.Token() {
			holds++
		}
	}
	if holds < l.Quorum() || st.Holder != again.Token() {
		t.Fatalf("after the delayed release arrived, the new hold is on %d of 3 nodes (holder %q); want a majority", holds, st.Holder)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The same with the servers themselves stopped (SIGSTOP) in the middle of
// a Release, for longer than the TTL, while the owner keeps trying to
// obtain the lock again with its token: once they continue, the new hold
// must be intact on a majority.
func TestPausedReleaseSparesNewHold(t *testing.T) {
	c := newCluster(t, 3)
	const ttl = time.Second
	l := c.locker(t, redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithTTL(ttl),
		redlock.WithRetry(redlock.LinearBackoff(20*time.Millisecond)))
	ctx := redistest.BoundedCtx(t)
	const key = "paused"
	lock := mustObtain(t, l, key)
	for _, s := range c.servers[1:] {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range c.servers[1:] {
			_ = s.Resume()
		}
	})
	if err := lock.Release(ctx); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Release with two nodes stopped: %v; want ErrNoQuorum", err)
	}
	type result struct {
		lock *redlock.Lock
		err  error
	}
	got := make(chan result, 1)
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		lock, err := l.Obtain(octx, key, redlock.WithToken(lock.Token()))
		got <- result{lock, err}
	}()
	// The old keys' TTL runs out while the servers are stopped (Redis
	// expires by the wall clock): the next hold is then a fresh key.
	select {
	case <-time.After(time.Until(lock.Until()) + ttl):
	case r := <-got:
		t.Fatalf("obtained with two of three nodes stopped: %v", r.err)
	}
	for _, s := range c.servers[1:] {
		if err := s.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("obtaining again with the same token: %v", r.err)
	}
	st, err := l.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	holds := 0
	for _, n := range st.Nodes {
		if n.Held && n.Token == r.lock.Token() {
			holds++
		}
	}
	if holds < l.Quorum() {
		t.Fatalf("after the stopped nodes continued, the new hold is on %d of 3 nodes (holder %q); want a majority", holds, st.Holder)
	}
	if err := r.lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
