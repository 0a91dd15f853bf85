package redlock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// movedLocker returns a Locker whose nodes are forwarders to servers, each
// connection opened already (the handshake learned each node's server),
// and the forwarders.
func movedLocker(t *testing.T, servers []*redistest.Server) (*redlock.Locker, []*redistest.Forwarder) {
	t.Helper()
	fws := make([]*redistest.Forwarder, len(servers))
	clients := make([]*redis.Client, len(servers))
	for i, s := range servers {
		fws[i] = redistest.ForwardT(t, s.Addr)
		clients[i] = fws[i].ClientT(t)
	}
	l := newLocker(t, clients, redlock.WithNodeTimeout(500*time.Millisecond))
	// Open the Locker's connections to every node before anything moves:
	// keys spread over every queue of each node's pipe.
	for i := range 64 {
		warm := mustObtain(t, l, fmt.Sprint("warm", i))
		if err := warm.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return l, fws
}

// One server votes once per call, whatever a proxy does between calls: node
// 1's proxy moves its open connection to node 0's server after the
// handshake, so that two of the Locker's nodes answer from one server.
// Another client holds the key on nodes 1 and 2; node 0's server must not
// grant twice (a random token found there is this very acquisition's, not a
// re-entry), nor extend twice, nor show a holder twice.
func TestOneVotePerServerPerCall(t *testing.T) {
	c := newCluster(t, 3)
	l, fws := movedLocker(t, c.servers)
	other := c.locker(t)

	t.Run("acquire", func(t *testing.T) {
		const key = "moved-acquire"
		held := mustObtain(t, other, key)
		// The acquisition is decided at a majority; the last node's grant
		// may still be on its way (a loaded machine). Node 0's would land
		// after the DEL, and without node 2's the other client holds node
		// 1 alone once node 0 forgets, so that this Locker may rightly
		// take nodes 0 and 2: wait for all three first.
		c.heldEverywhere(t, key, held.Token())
		if err := c.clients[0].Del(t.Context(), key).Err(); err != nil {
			t.Fatal(err)
		}
		fws[1].MoveTo(c.servers[0].Addr)
		defer fws[1].MoveTo(c.servers[1].Addr)
		lock, err := l.TryObtain(t.Context(), key)
		if err == nil {
			_ = lock.Release(t.Context())
			t.Fatalf("obtained %q through one server twice while another client holds nodes 1 and 2 (valid: %v): values %q", key, held.Valid(), c.values(t, key))
		}
		if !strings.Contains(err.Error(), "DUPLICATE") {
			t.Fatalf("TryObtain: %v, want a DUPLICATE node error", err)
		}
		if err := held.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("extend", func(t *testing.T) {
		const key = "moved-extend"
		lock := mustObtain(t, l, key)
		c.heldEverywhere(t, key, lock.Token())
		// Nodes 1 and 2 lost the key: only node 0's server holds it.
		for _, i := range []int{1, 2} {
			if err := c.clients[i].Del(t.Context(), key).Err(); err != nil {
				t.Fatal(err)
			}
		}
		fws[1].MoveTo(c.servers[0].Addr)
		defer fws[1].MoveTo(c.servers[1].Addr)
		if err := lock.Extend(t.Context(), 10*time.Second); !errors.Is(err, redlock.ErrLockNotHeld) && !errors.Is(err, redlock.ErrNoQuorum) {
			t.Fatalf("Extend held by one server through two nodes: %v, want ErrLockNotHeld or ErrNoQuorum", err)
		}
		if _, err := lock.TTL(t.Context()); err == nil {
			t.Fatal("TTL of a lock held by one server through two nodes: no error")
		}
		st, err := l.Inspect(t.Context(), key)
		if err == nil && st.Holder != "" {
			t.Fatalf("Inspect shows holder %q on one server through two nodes", st.Holder)
		}
	})
}

// The same for the calls that carry many keys: KeepAlive's batched
// extensions and a multi-key lock's Extend count one server once.
func TestOneVotePerServerPerBatchCall(t *testing.T) {
	c := newCluster(t, 3)
	l, fws := movedLocker(t, c.servers)
	cutOff := func(t *testing.T, keys ...string) {
		t.Helper()
		for _, i := range []int{1, 2} {
			if err := c.clients[i].Del(t.Context(), keys...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		fws[1].MoveTo(c.servers[0].Addr)
		t.Cleanup(func() { fws[1].MoveTo(c.servers[1].Addr) })
	}

	t.Run("keepalive", func(t *testing.T) {
		const key = "moved-keepalive"
		lock := mustObtain(t, l, key, redlock.WithTTL(1500*time.Millisecond))
		c.heldEverywhere(t, key, lock.Token())
		cutOff(t, key)
		held, stop := lock.KeepAlive(t.Context())
		defer stop()
		select {
		case <-held.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("KeepAlive still extends a lock that one server holds through two nodes: Until %v", lock.Until())
		}
	})

	t.Run("multi", func(t *testing.T) {
		keys := []string{"moved-multi-a", "moved-multi-b"}
		lock, err := l.TryObtainMulti(t.Context(), keys)
		if err != nil {
			t.Fatal(err)
		}
		c.heldEverywhere(t, keys[0], lock.Token())
		c.heldEverywhere(t, keys[1], lock.Token())
		cutOff(t, keys...)
		if err := lock.Extend(t.Context(), 10*time.Second); err == nil {
			t.Fatal("Extend of a multi-key lock that one server holds through two nodes: no error")
		}
	})
}
