package redlock_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/locktest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// sentinelOpts are the options of the tests' Lockers over a Sentinel node.
var sentinelOpts = []redlock.Option{
	redlock.WithNodeTimeout(time.Second),
	redlock.WithRetry(redlock.LinearBackoff(20 * time.Millisecond)),
}

// Bad Sentinel nodes are ErrInvalid, each with its reason, and so is one
// group given twice, even through different sentinels' lists that share
// one; a failover client given as a Server points to Sentinel.
func TestSentinelInvalid(t *testing.T) {
	t.Parallel()
	opts := func(name string, addrs ...string) *redis.FailoverOptions {
		return &redis.FailoverOptions{MasterName: name, SentinelAddrs: addrs}
	}
	fc := redis.NewFailoverClient(opts("m", "127.0.0.1:1"))
	t.Cleanup(func() { _ = fc.Close() })
	for _, tc := range []struct {
		name  string
		nodes []redlock.Node
		want  string
	}{
		{"nil options", []redlock.Node{redlock.Sentinel(nil)}, "nil options"},
		{"no name", []redlock.Node{redlock.Sentinel(opts("", "127.0.0.1:1"))}, "no MasterName"},
		{"no sentinels", []redlock.Node{redlock.Sentinel(opts("m"))}, "no SentinelAddrs"},
		{"empty address", []redlock.Node{redlock.Sentinel(opts("m", "127.0.0.1:1", ""))}, "empty address"},
		{"replica only", []redlock.Node{redlock.Sentinel(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, ReplicaOnly: true})}, "ReplicaOnly"},
		{"twice", []redlock.Node{redlock.Sentinel(opts("m", "127.0.0.1:1", "127.0.0.1:2")), redlock.Sentinel(opts("m", "127.0.0.1:1", "127.0.0.1:2"))}, "same node"},
		{"a shared sentinel", []redlock.Node{redlock.Sentinel(opts("m", "127.0.0.1:1", "127.0.0.1:2")), redlock.Sentinel(opts("m", "localhost:2", "127.0.0.1:3"))}, "same node"},
		{"failover client", []redlock.Node{redlock.Server(fc)}, "redlock.Sentinel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redlock.NewNodes(tc.nodes)
			if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewNodes: %v, want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
	// Two groups watched by the same sentinels are two nodes.
	l, err := redlock.NewNodes([]redlock.Node{redlock.Sentinel(opts("a", "127.0.0.1:1")), redlock.Sentinel(opts("b", "127.0.0.1:1"))})
	if err != nil {
		t.Fatalf("two groups of one sentinel: %v", err)
	}
	if got := strings.Join(l.Nodes(), ","); got != "sentinel a,sentinel b" {
		t.Errorf("Nodes() = %s", got)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
}

// A Sentinel group is one vote, cast by its named master, beside two
// standalone servers, one of them paused so that every lock needs the
// group's vote: locks are held on the named master, exclude a second
// owner, extend and release.
func TestSentinelGroupLocks(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroupT(t, redistest.SentinelOptions{})
	nodes := []redlock.Node{redlock.Sentinel(g.FailoverOptions())}
	servers := redistest.StartT(t, 2, redistest.Options{})
	for _, c := range redistest.ClientsT(t, servers) {
		nodes = append(nodes, redlock.Server(c))
	}
	if err := servers[1].Pause(); err != nil {
		t.Fatal(err)
	}
	a := locktest.NodesT(t, nodes, append(sentinelOpts, redlock.WithFencing())...)
	b := locktest.NodesT(t, nodes, sentinelOpts...)
	ctx := t.Context()
	master := g.Servers[0].NewClient()
	t.Cleanup(func() { _ = master.Close() })
	for i := range 4 {
		key := fmt.Sprintf("group-key-%d", i)
		k, err := a.TryObtain(ctx, key)
		if err != nil {
			t.Fatalf("TryObtain(%q): %v", key, err)
		}
		if k.Fence() == 0 {
			t.Errorf("%q: no fence on a fencing Locker", key)
		}
		if _, err := b.TryObtain(ctx, key); !errors.Is(err, redlock.ErrNotObtained) {
			t.Errorf("a second owner of %q: %v, want ErrNotObtained", key, err)
		}
		if n, err := master.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Errorf("%q on the named master: %d, %v", key, n, err)
		}
		if err := k.Extend(ctx, 10*time.Second); err != nil {
			t.Errorf("Extend(%q): %v", key, err)
		}
		if err := k.Release(ctx); err != nil {
			t.Errorf("Release(%q): %v", key, err)
		}
		k2, err := b.TryObtain(ctx, key)
		if err != nil {
			t.Fatalf("%q after its release: %v", key, err)
		}
		if err := k2.Release(ctx); err != nil {
			t.Error(err)
		}
	}
	if got := redlock.SentinelMaster(a, 0); got != g.Servers[0].Addr {
		t.Errorf("the link sends to %s, want the named master %s", got, g.Servers[0].Addr)
	}
}

// awaitSwitch waits until node 0 of l, a Sentinel node, sends to to.
func awaitSwitch(t *testing.T, l *redlock.Locker, to *redistest.Server) {
	t.Helper()
	err := redistest.Eventually(t, 10*time.Second, func() error {
		if got := redlock.SentinelMaster(l, 0); got != to.Addr {
			return fmt.Errorf("the link still sends to %s, not to the new master %s", got, to.Addr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// scriptsRun is how many script calls (EVALSHA, EVAL, FCALL) s counted.
func scriptsRun(t *testing.T, s *redistest.Server) int {
	t.Helper()
	c := s.NewClient()
	defer c.Close()
	stats, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cmd := range []string{"evalsha", "eval", "fcall"} {
		_, rest, ok := strings.Cut(stats, "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		v, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats of %s: %q", cmd, calls)
		}
		n += v
	}
	return n
}

// A failover whose demoted master stays a writable master for seconds
// gives no second holder: an acquisition queued for the old master when
// the link hears of the switch is answered with an error, never sent
// there, while another Locker holds the key on the new master; and no
// call of the link reaches the old master from the switch on.
func TestSentinelSwitchEndsTheOldMastersCalls(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroupT(t, redistest.SentinelOptions{})
	// A node timeout far above the failover's time: the held call is not
	// shed for waiting, only for its master's demotion.
	opts := []redlock.Option{redlock.WithNodeTimeout(30 * time.Second), redlock.WithTTL(time.Minute)}
	nodes := []redlock.Node{redlock.Sentinel(g.FailoverOptions())}
	a := locktest.NodesT(t, nodes, opts...)
	ctx := redistest.BoundedCtx(t)
	warm, err := a.TryObtain(ctx, "warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "contested"
	// Let go at the latest before the Locker closes (a failure's path).
	letGo := sync.OnceFunc(redlock.HoldQueue(a, 0, key))
	t.Cleanup(letGo)
	type result struct {
		k   *redlock.Lock
		err error
	}
	queued := make(chan result, 1)
	go func() {
		k, err := a.TryObtain(ctx, key)
		queued <- result{k, err}
	}()
	old, promoted, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	awaitSwitch(t, a, promoted)
	before := scriptsRun(t, old)
	b := locktest.NodesT(t, nodes, opts...)
	held, err := b.TryObtain(ctx, key)
	if err != nil {
		t.Fatalf("on the new master: %v", err)
	}
	// The scenario needs the demoted master writable when the queued
	// call would go out; say so if a busy machine let Sentinel demote it.
	if role, err := old.Role(ctx); err != nil || role != "master" {
		t.Logf("the old master's role at the release of the queue: %q, %v", role, err)
	}
	letGo()
	r := <-queued
	if r.err == nil {
		t.Fatalf("two holders of %q: one on the new master, one through the demoted master (valid %v)", key, r.k.Valid())
	}
	if !strings.Contains(r.err.Error(), "Sentinel named another master") {
		t.Errorf("the queued acquisition: %v, want it answered unsent for the demoted master", r.err)
	}
	// a's next calls vote on the new master, and see b's hold.
	if _, err := a.TryObtain(ctx, key); !errors.Is(err, redlock.ErrNotObtained) {
		t.Errorf("a second owner through the switched link: %v, want ErrNotObtained", err)
	}
	k, err := a.TryObtain(ctx, "after")
	if err != nil {
		t.Fatalf("after the switch: %v", err)
	}
	if n := scriptsRun(t, old) - before; n != 0 {
		t.Errorf("the demoted master ran %d script calls after the switch, want none", n)
	}
	oc := old.NewClient()
	defer oc.Close()
	if n, err := oc.Exists(ctx, key, "after").Result(); err != nil || n != 0 {
		t.Errorf("keys on the demoted master: %d, %v; want none", n, err)
	}
	for _, l := range []*redlock.Lock{k, held} {
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}

// Under the restart guard, a failover is a memory loss: the promoted
// replica (a run_id of its own) abstains once the link has switched to
// it, so no second owner gets the group's vote from it, even for a key
// whose hold the replica may have missed.
func TestSentinelGuardAbstainsOnThePromotedReplica(t *testing.T) {
	t.Parallel()
	g := redistest.StartSentinelGroupT(t, redistest.SentinelOptions{})
	nodes := []redlock.Node{redlock.Sentinel(g.FailoverOptions())}
	opts := append(sentinelOpts, redlock.WithRestartGuard(time.Minute))
	a := locktest.NodesT(t, nodes, opts...)
	ctx := redistest.BoundedCtx(t)
	if err := a.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	// Held until its TTL; the replica got it, but need not have.
	if _, err := a.TryObtain(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	old, promoted, err := g.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldID, err := old.RunID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	newID, err := promoted.RunID(ctx)
	if err != nil || newID == oldID {
		t.Fatalf("the promoted replica's run_id %q (%v), the old master's %q", newID, err, oldID)
	}
	awaitSwitch(t, a, promoted)
	b := locktest.NodesT(t, nodes, opts...)
	for _, l := range []*redlock.Locker{a, b} {
		for _, key := range []string{"held", "fresh"} {
			_, err := l.TryObtain(ctx, key)
			var qe *redlock.QuorumError
			if !errors.As(err, &qe) || !errors.Is(qe.Nodes[0].Err, redlock.ErrAbstained) {
				t.Errorf("%q on the promoted replica: %v, want it to abstain", key, err)
			}
		}
	}
}
