package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/integration/internal/backendtest"
)

// startOne starts a one-node process cluster with opts and returns it with
// a client through its proxy.
func startOne(t *testing.T, opts cluster.Options) (*cluster.Cluster, *redis.Client) {
	t.Helper()
	return startOneOn(t, cluster.Processes{}, opts)
}

// startOneOn is startOne on backend.
func startOneOn(t *testing.T, backend cluster.Backend, opts cluster.Options) (*cluster.Cluster, *redis.Client) {
	t.Helper()
	c, err := cluster.Start(t.Context(), backend, 1, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	rc := c.NewClient(0)
	t.Cleanup(func() { _ = rc.Close() })
	return c, rc
}

// keys returns which of names exist, through rc.
func present(t *testing.T, rc *redis.Client, names ...string) string {
	t.Helper()
	var out []string
	for _, k := range names {
		n, err := rc.Exists(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			out = append(out, k)
		}
	}
	return strings.Join(out, ",")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDataFaultsProcesses(t *testing.T) { testDataFaults(t, cluster.Processes{}) }

// TestDataFaultsContainers runs the data faults a container supports.
func TestDataFaultsContainers(t *testing.T) { testDataFaults(t, backendtest.Containers(t)) }

// testDataFaults checks that each data fault makes the node forget (or
// refuse) what the nemesis relies on, and that Heal undoes what lasts.
func testDataFaults(t *testing.T, backend cluster.Backend) {
	tests := []struct {
		name string
		opts cluster.Options
		// run sets "before", injects the fault, sets "after" where the
		// fault allows, and finishes it; want is what survives.
		run  func(t *testing.T, n *cluster.Node, rc *redis.Client)
		want string
	}{
		{"restart-rdb reloads the older snapshot", cluster.Options{}, func(t *testing.T, n *cluster.Node, rc *redis.Client) {
			must(t, rc.Set(t.Context(), "before", 1, 0).Err())
			must(t, n.Snapshot(t.Context()))
			must(t, rc.Set(t.Context(), "after", 1, 0).Err())
			must(t, n.Restart(t.Context()))
		}, "before"},
		{"restart-everysec loses the unsynced tail", cluster.Options{EverySec: true}, func(t *testing.T, n *cluster.Node, rc *redis.Client) {
			must(t, rc.Set(t.Context(), "before", 1, 0).Err())
			must(t, n.MarkSynced(t.Context()))
			must(t, rc.Set(t.Context(), "after", 1, 0).Err())
			must(t, n.CrashLosingUnsynced(t.Context()))
		}, "before"},
		{"failover promotes a lagging replica", cluster.Options{Replicas: true}, func(t *testing.T, n *cluster.Node, rc *redis.Client) {
			must(t, rc.Set(t.Context(), "before", 1, 0).Err())
			// WAIT returns once the replica has the write.
			if got, err := rc.Wait(t.Context(), 1, 10000).Result(); err != nil || got != 1 {
				t.Fatalf("WAIT: %d replicas, %v", got, err)
			}
			old := n.Server().Addr()
			must(t, n.StallReplica(t.Context()))
			must(t, rc.Set(t.Context(), "after", 1, 0).Err())
			must(t, n.Failover(t.Context()))
			if n.Server().Addr() == old {
				t.Error("the node still points at its old master")
			}
		}, "before"},
		{"flush empties the node", cluster.Options{}, func(t *testing.T, n *cluster.Node, rc *redis.Client) {
			must(t, rc.Set(t.Context(), "before", 1, 0).Err())
			must(t, n.Flush(t.Context()))
			must(t, rc.Set(t.Context(), "after", 1, 0).Err())
		}, "after"},
		{"evict drops keys with a TTL", cluster.Options{MaxMemory: "4mb"}, func(t *testing.T, n *cluster.Node, rc *redis.Client) {
			must(t, rc.Set(t.Context(), "before", 1, time.Minute).Err())
			must(t, rc.Set(t.Context(), "forever", 1, 0).Err()) // no TTL: volatile-* never evicts it
			must(t, n.Fill(t.Context(), "volatile-ttl"))
			must(t, n.Heal(t.Context()))
			if size, err := rc.DBSize(t.Context()).Result(); err != nil || size > 1 {
				t.Errorf("after Heal: %d keys (%v), want the filler keys gone", size, err)
			}
		}, "forever"},
		{"readonly refuses writes until healed", cluster.Options{}, func(t *testing.T, n *cluster.Node, rc *redis.Client) {
			must(t, rc.Set(t.Context(), "before", 1, 0).Err())
			must(t, n.ReadOnly(t.Context()))
			if err := rc.Set(t.Context(), "refused", 1, 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
				t.Errorf("SET on a read-only node: %v, want READONLY", err)
			}
			must(t, n.Heal(t.Context()))
			must(t, rc.Set(t.Context(), "after", 1, 0).Err())
		}, "after,before"},
		{"clock-jump expires keys early", cluster.Options{Clock: true}, func(t *testing.T, n *cluster.Node, rc *redis.Client) {
			must(t, rc.Set(t.Context(), "before", 1, 10*time.Second).Err())
			must(t, rc.Set(t.Context(), "forever", 1, 0).Err())
			must(t, n.SetClock(20*time.Second, 1))
		}, "forever"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A container has no clock shim and no data directory here,
			// and its replica could not reach the master's published
			// port.
			if backend.Name() != "processes" && (tt.opts.EverySec || tt.opts.Replicas || tt.opts.Clock) {
				t.Skipf("%s: processes only", tt.name)
			}
			c, rc := startOneOn(t, backend, tt.opts)
			tt.run(t, c.Nodes[0], rc)
			if got := present(t, rc, "after", "before", "forever"); got != tt.want {
				t.Errorf("keys left: %q, want %q", got, tt.want)
			}
		})
	}
}

// TestClockRate checks that a clock set to run fast runs fast, and that
// Heal sets it back to real time.
func TestClockRate(t *testing.T) {
	c, rc := startOne(t, cluster.Options{Clock: true})
	n := c.Nodes[0]
	// offset returns the server's clock minus ours.
	offset := func() time.Duration {
		before := time.Now()
		srv, err := rc.Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		return srv.Sub(before.Add(time.Since(before) / 2))
	}
	if d := offset(); d.Abs() > 100*time.Millisecond {
		t.Fatalf("before any fault the server's clock is off by %v", d)
	}
	must(t, n.SetClock(0, 3))
	start, began := offset(), time.Now()
	time.Sleep(500 * time.Millisecond) // the time to measure, not a wait for an event
	// At three times real speed the server gains twice the time that
	// passed here (the sleep may overrun on a loaded machine).
	gained, passed := offset()-start, time.Since(began)
	if gained < passed || gained > 3*passed {
		t.Errorf("a clock at 3x gained %v in %v, want about twice that", gained, passed)
	}
	must(t, n.Heal(t.Context()))
	if d := offset(); d.Abs() > 100*time.Millisecond {
		t.Errorf("after Heal the server's clock is off by %v", d)
	}
	if err := n.SetClock(0, -1); err == nil {
		t.Error("a negative clock rate was accepted")
	}
}

// TestOptionsConflict checks that contradictory options are refused.
func TestOptionsConflict(t *testing.T) {
	_, err := cluster.Start(t.Context(), cluster.Processes{}, 1, cluster.Options{Persistent: true, EverySec: true})
	if err == nil {
		t.Fatal("Persistent with EverySec was accepted")
	}
}

// TestClockOnPlainServerUnsupported checks that a clock fault on a server
// without the shim says so.
func TestClockOnPlainServerUnsupported(t *testing.T) {
	c, _ := startOne(t, cluster.Options{})
	if err := c.Nodes[0].SetClock(time.Second, 1); !errors.Is(err, cluster.ErrUnsupported) {
		t.Errorf("SetClock on a plain server: %v, want ErrUnsupported", err)
	}
}
