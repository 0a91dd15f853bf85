package redistest_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// A Sentinel failover names a new master, with a run_id of its own, that
// has the keys the old one had replicated; a failover client follows it;
// and the old master still takes writes as a master right after every
// sentinel named the new one.
func TestClusterSentinelFailover(t *testing.T) {
	t.Parallel()
	start := time.Now()
	g := redistest.StartSentinelGroupT(t, redistest.SentinelOptions{})
	t.Logf("a Sentinel group of 1 master, 1 replica and 3 sentinels started in %v", time.Since(start).Round(time.Millisecond))
	ctx := t.Context()
	fc := redis.NewFailoverClient(g.FailoverOptions())
	t.Cleanup(func() { _ = fc.Close() })
	if err := fc.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	first, err := g.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first != g.Servers[0] {
		t.Errorf("the sentinels name %s, want %s", first.Addr, g.Servers[0].Addr)
	}
	mc := first.NewClient()
	t.Cleanup(func() { _ = mc.Close() })
	if n, err := mc.Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d, %v", n, err)
	}
	oldID, err := first.RunID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	old, promoted, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("every sentinel named the new master after %v", time.Since(start).Round(time.Millisecond))
	// The demoted master, not yet told, is still a writable master.
	if err := mc.Set(ctx, "k", "stale", 0).Err(); err != nil {
		t.Errorf("SET on the old master right after the failover: %v", err)
	}
	if role, err := old.Role(ctx); err != nil || role != "master" {
		t.Errorf("the old master's role right after the failover: %q, %v", role, err)
	}
	if old != first || promoted == first || promoted != g.Servers[1] {
		t.Errorf("failover from %s to %s; want from %s to %s", old.Addr, promoted.Addr, first.Addr, g.Servers[1].Addr)
	}
	if id, err := promoted.RunID(ctx); err != nil || id == oldID {
		t.Errorf("the new master's run_id %q (%v), the old one's %q", id, err, oldID)
	}
	pc := promoted.NewClient()
	t.Cleanup(func() { _ = pc.Close() })
	if got, err := pc.Get(ctx, "k").Result(); err != nil || got != "before" {
		t.Errorf("GET on the new master: %q, %v; want before", got, err)
	}
	// The failover client reaches the new master (go-redis closes its
	// connections to the old one when a sentinel announces the switch).
	if err := redistest.Eventually(t, 10*time.Second, func() error {
		got, err := fc.Get(ctx, "k").Result()
		if err == nil && got != "before" {
			err = errNot("before", got)
		}
		return err
	}); err != nil {
		t.Errorf("the failover client: %v", err)
	}
}

// A replica of priority 0 is never promoted, and the options refuse more
// priorities than replicas.
func TestClusterSentinelPriorities(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if _, err := redistest.StartSentinelGroup(ctx, redistest.SentinelOptions{Replicas: 1, Priorities: []int{1, 2}}); err == nil {
		t.Error("two priorities for one replica: no error")
	}
	g := redistest.StartSentinelGroupT(t, redistest.SentinelOptions{Replicas: 2, Priorities: []int{0}})
	cl := g.Servers[1].NewClient()
	t.Cleanup(func() { _ = cl.Close() })
	if got, err := cl.ConfigGet(ctx, "replica-priority").Result(); err != nil || got["replica-priority"] != "0" {
		t.Errorf("the first replica's replica-priority: %v, %v; want 0", got, err)
	}
	_, promoted, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if promoted != g.Servers[2] {
		t.Errorf("the sentinels promoted %s, want the replica of default priority %s", promoted.Addr, g.Servers[2].Addr)
	}
}
