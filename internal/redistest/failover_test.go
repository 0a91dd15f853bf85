package redistest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// A replica takes over its master's slots in each failover mode, with the
// old master answering, paused, or killed; the slots' master then has
// another run_id, keeps the keys the replica had received, and the old
// master comes back as a replica of the new one.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterT(t, redistest.ClusterOptions{Masters: 3, Replicas: 1, NodeTimeout: 2 * time.Second})
	ctx := t.Context()
	cc := c.ClusterClientT(t)
	for i, tc := range []struct {
		mode  redistest.FailoverMode
		fault string // what happens to the old master first
	}{
		{redistest.FailoverCoordinated, ""},
		{redistest.FailoverForce, "pause"},
		{redistest.FailoverTakeover, "kill"},
	} {
		t.Run(fmt.Sprintf("mode=%q/old=%s", tc.mode, tc.fault), func(t *testing.T) {
			master, replica := c.Nodes[i], c.Nodes[3+i]
			key := ""
			for j := 0; key == ""; j++ {
				k := fmt.Sprintf("fo-%d-%d", i, j)
				if owner, err := c.KeyOwner(ctx, k); err != nil {
					t.Fatal(err)
				} else if owner == master {
					key = k
				}
			}
			if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			// WAIT: the replica has the key before its master goes.
			mc := master.NewClient()
			n, err := mc.Wait(ctx, 1, 5000).Result()
			_ = mc.Close()
			if err != nil || n != 1 {
				t.Fatalf("WAIT 1: %d, %v", n, err)
			}
			oldID, err := master.RunID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch tc.fault {
			case "pause":
				if err := master.Pause(); err != nil {
					t.Fatal(err)
				}
			case "kill":
				if err := master.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			old, err := c.Failover(ctx, replica, tc.mode)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("failover took %v", time.Since(start).Round(time.Millisecond))
			if old != master {
				t.Errorf("old master %s, want %s", old.Addr, master.Addr)
			}
			// Every node that answers knows already, without waiting.
			for _, n := range c.Nodes {
				if n == master && tc.fault != "" {
					continue
				}
				cl := n.NewClient()
				err := cl.Get(ctx, key).Err()
				_ = cl.Close()
				if n == replica && err != nil {
					t.Errorf("GET on the new master: %v", err)
				}
				if n != replica && (err == nil || !strings.HasPrefix(err.Error(), "MOVED ") || !strings.HasSuffix(err.Error(), " "+replica.Addr)) {
					t.Errorf("GET on %s right after the failover: %v, want MOVED to %s", n.Addr, err, replica.Addr)
				}
			}
			newID, err := replica.RunID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if newID == oldID {
				t.Errorf("the new master has the old master's run_id %s", oldID)
			}
			owner, err := c.KeyOwner(ctx, key)
			if err != nil || owner != replica {
				t.Errorf("key owner %v, %v; want %s", owner, err, replica.Addr)
			}
			rc := replica.NewClient()
			got, err := rc.Get(ctx, key).Result()
			_ = rc.Close()
			if err != nil || got != "v" {
				t.Errorf("GET on the new master: %q, %v", got, err)
			}
			switch tc.fault {
			case "pause":
				if err := master.Resume(); err != nil {
					t.Fatal(err)
				}
			case "kill":
				if err := master.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			tp, err := awaitReplica(ctx, c, master, replica)
			if err != nil {
				t.Fatal(err)
			}
			if tp.MasterOf[master] != replica {
				t.Errorf("the old master replicates %v, want %s", tp.MasterOf[master], replica.Addr)
			}
		})
	}
}

// awaitReplica waits until every node sees r as a replica of m and the
// cluster is ready.
func awaitReplica(ctx context.Context, c *redistest.Cluster, r, m *redistest.ClusterNode) (*redistest.Topology, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if err := c.AwaitReady(ctx); err != nil {
			return nil, err
		}
		tp, err := c.Topology(ctx)
		if err != nil {
			return nil, err
		}
		if tp.MasterOf[r] == m {
			return tp, nil
		}
		select {
		case <-ctx.Done():
			return tp, fmt.Errorf("%s is no replica of %s: %w", r.Addr, m.Addr, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
