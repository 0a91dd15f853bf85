package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/locktest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// A failover is a memory loss for the slots the promoted replica takes
// over (its run_id is not the old master's): under the restart guard the
// new master abstains for them, and the guard's function library is
// loaded there as on any new master.
func TestClusterGuardQuarantinesAfterFailover(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterT(t, redistest.ClusterOptions{Replicas: 1})
	l := locktest.NodesT(t, []redlock.Node{redlock.Cluster(c.ClusterClientT(t))}, append(clusterOpts, redlock.WithRestartGuard(time.Minute))...)
	ctx := clusterCtx(t)
	if err := l.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	const key = "failing-over"
	k, err := l.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := c.KeyOwner(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := c.Topology(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replica := tp.Replicas(owner)[0]
	if _, err := c.Failover(ctx, replica, redistest.FailoverForce); err != nil {
		t.Fatal(err)
	}
	// The link learns of the new master from a redirect or a reading of
	// the map; until then the old one answers MOVED. Either way no vote.
	abstained := false
	for range 50 {
		_, err = l.TryObtain(ctx, key)
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("after the failover: %v, want no vote", err)
		}
		if errors.Is(qe.Nodes[0].Err, redlock.ErrAbstained) {
			abstained = true
			break
		}
		time.Sleep(20 * time.Millisecond) // the map is read at most every 50ms
	}
	if !abstained {
		t.Fatalf("the promoted replica never abstained: %v", err)
	}
	cl := replica.NewClient()
	defer cl.Close()
	if libs, err := cl.FunctionList(ctx, redis.FunctionListQuery{}).Result(); err != nil || len(libs) == 0 {
		t.Errorf("the guard's library on the new master: %v, %v", libs, err)
	}
	// The hold came over with the replica's copy, or was lost with it.
	if err := k.Release(ctx); err != nil && !errors.Is(err, redlock.ErrLockExpired) && !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("release after the failover: %v", err)
	}
}

// A waiter on a key held on a cluster is woken by its release: the
// release's PUBLISH reaches the subscription, whichever master it is on.
func TestClusterReleaseWakesWaiter(t *testing.T) {
	t.Parallel()
	clusters, nodes := clusterNodes(t, 1)
	holder := locktest.NodesT(t, nodes, redlock.WithTTL(10*time.Second))
	l := locktest.NodesT(t, nodes, clusterOpts...)
	held, err := holder.Obtain(clusterCtx(t), "wake-me")
	if err != nil {
		t.Fatal(err)
	}
	got := waiter(t, l, "wake-me")
	// The subscription is on any master; once the waiter listens there,
	// the release is announced to it.
	if !subscribedOnAny(t, clusters[0].Nodes, redlock.ReservedPrefix+"released:wake-me") {
		t.Fatal("the waiter never subscribed")
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	wokenSoon(t, got, time.Now())
}

// KeepAlive extends locks of many slots in rounds per slot; Inspect reads
// a holder, and ForceRelease frees its key, on cluster nodes.
func TestClusterKeepAliveInspectForceRelease(t *testing.T) {
	t.Parallel()
	_, nodes := clusterNodes(t, 3)
	l := locktest.NodesT(t, nodes, append(clusterOpts, redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithTTL(time.Second))...)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var locks []*redlock.Lock
	for i := range 8 {
		k, err := l.Obtain(ctx, fmt.Sprintf("kept-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, k)
	}
	var works []context.Context
	for _, k := range locks {
		work, stop := k.KeepAlive(ctx)
		defer stop()
		works = append(works, work)
	}
	// Three TTLs: without extensions every lock would have expired.
	time.Sleep(3 * time.Second)
	for i, w := range works {
		if err := context.Cause(w); err != nil {
			t.Errorf("lock %d lost under KeepAlive: %v", i, err)
		}
	}
	st, err := l.Inspect(ctx, "kept-0")
	if err != nil || st.Holder != locks[0].Token() {
		t.Errorf("Inspect of a held key: %+v, %v; want its holder %q", st, err, locks[0].Token())
	}
	if err := l.ForceRelease(ctx, "kept-1"); err != nil {
		t.Fatal(err)
	}
	if k, err := l.Obtain(ctx, "kept-1"); err != nil {
		t.Errorf("after ForceRelease: %v", err)
	} else if err := k.Release(ctx); err != nil {
		t.Error(err)
	}
}

// Mutual exclusion with three clusters while the slots of the locked keys
// migrate back and forth in one, a master of another is paused, and a
// master of the third fails over (losing what its replica had not
// received), under the restart guard: no two valid holders of a key, ever.
func TestClusterMutualExclusionUnderFaults(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	clusters := make([]*redistest.Cluster, 3)
	nodes := make([]redlock.Node, 3)
	for i := range clusters {
		opts := redistest.ClusterOptions{}
		if i == 2 {
			opts.Replicas = 1
		}
		clusters[i] = redistest.StartClusterT(t, opts)
		nodes[i] = redlock.Cluster(clusters[i].ClusterClientT(t))
	}
	opts := append(clusterOpts, redlock.WithNodeTimeout(500*time.Millisecond), redlock.WithTTL(2*time.Second), redlock.WithRestartGuard(2*time.Second))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := locktest.NodesT(t, nodes, opts...).Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	keys := []string{"safe-a", "safe-b", "safe-c"}
	var checker exclusionChecker
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		l := locktest.NodesT(t, nodes, opts...)
		wg.Go(func() { checker.contend(ctx, t, l, keys, w, stop) })
	}
	faults := clusterFaults{t: t, ctx: ctx, rng: rng, clusters: clusters, keys: keys}
	faults.run()
	close(stop)
	wg.Wait()
	if v := checker.violations.Load(); v != 0 {
		t.Fatalf("seed %d: %d times two valid holders of one key", seed, v)
	}
	if n := checker.grants.Load(); n < 20 {
		t.Errorf("seed %d: only %d grants under the faults", seed, n)
	}
	t.Logf("%d grants, 0 overlaps", checker.grants.Load())
}

// exclusionChecker records, per key, until when its last holder's lock is
// valid; a grant before then, to another holder, is a violation.
type exclusionChecker struct {
	mu                 sync.Mutex
	until              map[string]time.Time
	grants, violations atomic.Int64
}

func (c *exclusionChecker) contend(ctx context.Context, t *testing.T, l *redlock.Locker, keys []string, w int, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := keys[(w+i)%len(keys)]
		k, err := l.TryObtain(ctx, key)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		now := time.Now()
		c.mu.Lock()
		if c.until == nil {
			c.until = map[string]time.Time{}
		}
		if now.Before(c.until[key]) {
			c.violations.Add(1)
			t.Errorf("worker %d got %q at %v, held by another until %v", w, key, now, c.until[key])
		}
		c.until[key] = k.Until()
		c.mu.Unlock()
		c.grants.Add(1)
		time.Sleep(5 * time.Millisecond)
		c.mu.Lock()
		c.until[key] = time.Time{}
		c.mu.Unlock()
		if err := k.Release(context.Background()); err != nil && !errors.Is(err, redlock.ErrNoQuorum) &&
			!errors.Is(err, redlock.ErrLockExpired) && !errors.Is(err, redlock.ErrLockLost) {
			t.Errorf("release: %v", err)
		}
	}
}

// clusterFaults are the faults of the mutual exclusion test: cluster 0's
// key slots migrate, cluster 1's master of a key is paused, cluster 2
// fails over.
type clusterFaults struct {
	t        *testing.T
	ctx      context.Context
	rng      *rand.Rand
	clusters []*redistest.Cluster
	keys     []string
}

func (f *clusterFaults) run() {
	t, ctx := f.t, f.ctx
	for round := range 3 {
		key := f.keys[f.rng.IntN(len(f.keys))]
		c := f.clusters[0]
		slot, err := c.KeySlot(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		from, err := c.SlotOwner(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		to := c.Nodes[(round+1)%3]
		if to.ID == from.ID {
			to = c.Nodes[(round+2)%3]
		}
		if err := c.MigrateSlot(ctx, slot, to, nil); err != nil {
			t.Fatalf("migrating %q's slot: %v", key, err)
		}
		paused, err := f.clusters[1].KeyOwner(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := paused.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := paused.Resume(); err != nil {
			t.Fatal(err)
		}
		f.failover(key)
		time.Sleep(500 * time.Millisecond)
	}
}

// failover has a replica of the master of key in cluster 2 take over
// alone, without its master's consent or the masters' votes (writes may
// be lost; masters do not vote twice for one shard within two node
// timeouts, and the rounds come faster than that).
func (f *clusterFaults) failover(key string) {
	t, c := f.t, f.clusters[2]
	owner, err := c.KeyOwner(f.ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := c.Topology(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Failover(f.ctx, tp.Replicas(owner)[0], redistest.FailoverTakeover); err != nil {
		t.Fatalf("failover of %q's master: %v", key, err)
	}
}

// The release subscription of a cluster node is made on any node that
// answers: with the first seed down, a waiter on a key of another shard
// is still woken by its release.
func TestClusterReleaseWakesWaiterWithFirstSeedDown(t *testing.T) {
	t.Parallel()
	// A long node timeout: the cluster keeps serving the other shards'
	// slots while the first master is down.
	c := redistest.StartClusterT(t, redistest.ClusterOptions{NodeTimeout: time.Minute})
	nodes := []redlock.Node{redlock.Cluster(c.ClusterClientT(t))}
	holder := locktest.NodesT(t, nodes, redlock.WithTTL(10*time.Second))
	l := locktest.NodesT(t, nodes, clusterOpts...)
	ctx := clusterCtx(t)
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("wake-%d", i)
		owner, err := c.KeyOwner(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if owner.ID != c.Nodes[0].ID {
			key = k
		}
	}
	if err := c.Nodes[0].Kill(); err != nil {
		t.Fatal(err)
	}
	held, err := holder.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := waiter(t, l, key)
	if !subscribedOnAny(t, c.Nodes[1:], redlock.ReservedPrefix+"released:"+key) {
		t.Fatal("the waiter never subscribed on a node that runs")
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wokenSoon(t, got, time.Now())
}

// subscribedOnAny waits, up to 10s, until one of nodes has a subscriber
// of channel, and reports whether one did.
func subscribedOnAny(t *testing.T, nodes []*redistest.ClusterNode, channel string) bool {
	t.Helper()
	return poll(t, 10*time.Second, func() bool {
		for _, n := range nodes {
			cl := n.NewClient()
			subs, err := cl.PubSubNumSub(t.Context(), channel).Result()
			_ = cl.Close()
			if err == nil && subs[channel] == 1 {
				return true
			}
		}
		return false
	})
}
