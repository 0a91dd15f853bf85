package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/integration/internal/backendtest"
	_ "github.com/quorumlock/redlock/integration/internal/flags" // go test ./... -args passes the chaos flags here too
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // dial errors to nodes the tests took down on purpose
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestFaultsProcesses(t *testing.T) { testFaults(t, cluster.Processes{}) }

func TestFaultsContainers(t *testing.T) { testFaults(t, backendtest.Containers(t)) }

// testFaults checks that each fault does what the nemesis relies on it to do,
// and that healing undoes it.
func testFaults(t *testing.T, backend cluster.Backend) {
	ctx := t.Context()
	start := func(t *testing.T, persistent bool) (*cluster.Cluster, *redis.Client) {
		t.Helper()
		c, rc := startOneOn(t, backend, cluster.Options{Persistent: persistent})
		if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		return c, rc
	}
	// down asserts that a command through the proxy fails within the
	// deadline; up that it works and sees the key (or not).
	down := func(t *testing.T, rc *redis.Client) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := rc.Ping(ctx).Err(); err == nil {
			t.Fatal("node still answers")
		}
	}
	up := func(t *testing.T, rc *redis.Client, want string) {
		t.Helper()
		got, err := rc.Get(ctx, "k").Result()
		if errors.Is(err, redis.Nil) {
			got, err = "(missing)", nil
		}
		if err != nil || got != want {
			t.Fatalf("GET k = %q, %v; want %q", got, err, want)
		}
	}
	heal := func(t *testing.T, c *cluster.Cluster) {
		t.Helper()
		if err := c.Heal(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("kill and restart with persistence", func(t *testing.T) {
		c, rc := start(t, true)
		if err := c.Nodes[0].Kill(ctx); err != nil {
			t.Fatal(err)
		}
		down(t, rc)
		if err := c.Nodes[0].Restart(ctx); err != nil {
			t.Fatal(err)
		}
		up(t, rc, "v")
	})
	t.Run("restart without persistence forgets", func(t *testing.T) {
		c, rc := start(t, false)
		if err := c.Nodes[0].Restart(ctx); err != nil {
			t.Fatal(err)
		}
		up(t, rc, "(missing)")
	})
	t.Run("heal restarts a killed node", func(t *testing.T) {
		c, rc := start(t, true)
		if err := c.Nodes[0].Kill(ctx); err != nil {
			t.Fatal(err)
		}
		heal(t, c)
		up(t, rc, "v")
	})
	t.Run("pause", func(t *testing.T) {
		c, rc := start(t, false)
		if err := c.Nodes[0].Pause(ctx); err != nil {
			t.Fatal(err)
		}
		down(t, rc)
		heal(t, c)
		up(t, rc, "v")
	})
	t.Run("blackhole", func(t *testing.T) {
		c, rc := start(t, false)
		if err := c.Nodes[0].Blackhole(); err != nil {
			t.Fatal(err)
		}
		down(t, rc)
		heal(t, c)
		up(t, rc, "v")
	})
	t.Run("dropped replies", func(t *testing.T) {
		c, rc := start(t, false)
		if err := c.Nodes[0].DropReplies(); err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := rc.Set(sctx, "k", "w", 0).Err(); err == nil {
			t.Fatal("SET got a reply through a proxy that drops replies")
		}
		// The request went through: the server applies it, though perhaps a
		// moment after the client gave up. Ask past the proxy until it shows.
		direct := cluster.NewClient(c.Nodes[0].Server().Addr())
		defer direct.Close()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, err := direct.Get(wctx, "k").Result(); err == nil && v == "w" {
				break
			}
			select {
			case <-wctx.Done():
				t.Fatal("the SET whose reply was dropped never reached the server")
			case <-tick.C:
			}
		}
		heal(t, c)
		up(t, rc, "w")
	})
	t.Run("isolate", func(t *testing.T) {
		c, rc := start(t, false)
		c.Nodes[0].Isolate()
		down(t, rc)
		heal(t, c)
		up(t, rc, "v")
	})
	t.Run("reset", func(t *testing.T) {
		c, rc := start(t, false)
		if err := c.Nodes[0].ResetPeer(); err != nil {
			t.Fatal(err)
		}
		down(t, rc)
		heal(t, c)
		up(t, rc, "v")
	})
	t.Run("latency", func(t *testing.T) {
		c, rc := start(t, false)
		if err := c.Nodes[0].Latency(100*time.Millisecond, 0); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		up(t, rc, "v")
		// A round trip crosses the proxy twice.
		if d := time.Since(began); d < 200*time.Millisecond {
			t.Fatalf("GET took %v through 100ms of latency each way", d)
		}
		heal(t, c)
		up(t, rc, "v")
	})
}
