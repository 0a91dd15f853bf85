package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// A quorum of two standalone masters and one Redis Cluster, given as
// URLs: a lock is held on all three (on the cluster, by the master of its
// key's slot), excludes a second owner, and is released on all three.
// Close closes the clients NewFromURLs built, the cluster's too.
func TestNewFromURLsMixedQuorum(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, redistest.Options{})
	c := redistest.StartClusterT(t, redistest.ClusterOptions{})
	urls := []string{
		"redis://" + servers[0].Addr,
		"redis://" + servers[1].Addr,
		"redis+cluster://" + strings.Join(c.Addrs(), ",") + "?dial_timeout=1s",
	}
	l, err := redlock.NewFromURLs(urls, clusterOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if nodes := l.Nodes(); len(nodes) != 3 || !strings.HasPrefix(nodes[2], "cluster ") || l.Quorum() != 2 {
		t.Fatalf("Nodes %q, quorum %d; want two servers and a cluster, quorum 2", nodes, l.Quorum())
	}
	ctx := t.Context()
	const key = "mixed-quorum"
	owner, err := c.KeyOwner(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	holders := []*redis.Client{servers[0].NewClient(), servers[1].NewClient(), owner.NewClient()}
	defer func() {
		for _, h := range holders {
			_ = h.Close()
		}
	}()
	holds := func(want int64) {
		t.Helper()
		for i, h := range holders {
			if n, err := h.Exists(ctx, key).Result(); err != nil || n != want {
				t.Errorf("node %d: EXISTS %s = %d, %v; want %d", i, key, n, err, want)
			}
		}
	}
	lock, err := l.TryObtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// TryObtain returns once two nodes granted; the third's grant may
	// come a moment later.
	poll(t, 10*time.Second, func() bool {
		for _, h := range holders {
			if n, err := h.Exists(ctx, key).Result(); err != nil || n != 1 {
				return false
			}
		}
		return true
	})
	holds(1)
	other, err := redlock.NewFromURLs(urls, clusterOpts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryObtain(ctx, key); !errors.Is(err, redlock.ErrNotObtained) {
		t.Errorf("a second owner: %v, want ErrNotObtained", err)
	}
	if err := other.Close(); err != nil {
		t.Error(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	owned := redlock.OwnedClients(l)
	// Release returns once a majority released; Close waits for the
	// last node's call too, so every node is released after it.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	holds(0)
	if len(owned) != 3 {
		t.Fatalf("%d owned clients, want 3", len(owned))
	}
	if cc, ok := owned[2].(*redis.ClusterClient); !ok {
		t.Errorf("owned client 2 is a %T, want a *redis.ClusterClient", owned[2])
	} else if err := cc.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("the cluster client after Close: Ping = %v, want %v", err, redis.ErrClosed)
	}
}
