package redistest_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// ephemeral returns the kernel's range of ephemeral ports, or skips.
func ephemeral(t *testing.T) (lo, hi int) {
	t.Helper()
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral port range to read here: %v", err)
	}
	if _, err := fmt.Sscan(string(raw), &lo, &hi); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", raw, err)
	}
	return lo, hi
}

// A cluster of three masters starts, every node's client and bus ports lie
// outside the ephemeral range, and the cluster client reads back keys from
// every shard, each from the master the cluster names its owner; a flush
// of one shard loses that shard's keys only.
func TestClusterServesEveryShard(t *testing.T) {
	t.Parallel()
	start := time.Now()
	c := redistest.StartClusterT(t, redistest.ClusterOptions{})
	t.Logf("a cluster of 3 masters started in %v", time.Since(start).Round(time.Millisecond))
	lo, hi := ephemeral(t)
	ctx := t.Context()
	seen := map[int]bool{}
	for _, n := range c.Nodes {
		// The bus port the node listens on, as it tells the others.
		cl := n.NewClient()
		nodes, err := cl.ClusterNodes(ctx).Result()
		_ = cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("127.0.0.1:%d@%d ", n.Port, n.BusPort)
		if !strings.Contains(nodes, want+"myself") {
			t.Errorf("node %s does not announce itself as %q:\n%s", n.Addr, want, nodes)
		}
		for _, p := range []int{n.Port, n.BusPort} {
			if p >= lo && p <= hi {
				t.Errorf("node %s: port %d inside the ephemeral range %d-%d", n.Addr, p, lo, hi)
			}
			if seen[p] {
				t.Errorf("port %d used twice", p)
			}
			seen[p] = true
		}
	}
	cc := c.ClusterClientT(t)
	byOwner := map[*redistest.ClusterNode][]string{}
	for i := 0; len(byOwner) < len(c.Nodes) || i < 30; i++ {
		if i == 1000 {
			t.Fatalf("1000 keys fell on %d of %d masters", len(byOwner), len(c.Nodes))
		}
		key := fmt.Sprintf("key-%d", i)
		if err := cc.Set(ctx, key, key, 0).Err(); err != nil {
			t.Fatal(err)
		}
		owner, err := c.KeyOwner(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		byOwner[owner] = append(byOwner[owner], key)
	}
	for owner, keys := range byOwner {
		cl := owner.NewClient()
		for _, k := range keys {
			if got, err := cl.Get(ctx, k).Result(); err != nil || got != k {
				t.Errorf("GET %s on its owner %s: %q, %v", k, owner.Addr, got, err)
			}
		}
		_ = cl.Close()
	}
	flushed := c.Nodes[0]
	if err := c.FlushShard(ctx, flushed); err != nil {
		t.Fatal(err)
	}
	for owner, keys := range byOwner {
		for _, k := range keys {
			n, err := cc.Exists(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			want := int64(1)
			if owner == flushed {
				want = 0
			}
			if n != want {
				t.Errorf("after a flush of %s, key %s of %s exists %d times", flushed.Addr, k, owner.Addr, n)
			}
		}
	}
}

// errNot says a read gave got instead of want.
func errNot(want, got string) error { return fmt.Errorf("got %q, want %q", got, want) }
