package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/locktest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// clusterNodes starts n 3-master clusters and returns them with a Cluster
// node of each.
func clusterNodes(t *testing.T, n int) ([]*redistest.Cluster, []redlock.Node) {
	t.Helper()
	clusters := make([]*redistest.Cluster, n)
	nodes := make([]redlock.Node, n)
	for i := range clusters {
		clusters[i] = redistest.StartClusterT(t, redistest.ClusterOptions{})
		nodes[i] = redlock.Cluster(clusters[i].ClusterClientT(t))
	}
	return clusters, nodes
}

// clusterCtx bounds a cluster test's waits (Obtain retries until it):
// a minute, ended at cleanup.
func clusterCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// clusterOpts are the options of the tests' Lockers over cluster nodes.
var clusterOpts = []redlock.Option{
	redlock.WithNodeTimeout(2 * time.Second),
	redlock.WithRetry(redlock.LinearBackoff(20 * time.Millisecond)),
}

// Each lock's vote on a cluster is cast by the master of its key's slot:
// keys spread over every master are each held there, and exclude a
// second owner.
func TestClusterNodesLockOnTheSlotsMaster(t *testing.T) {
	t.Parallel()
	clusters, nodes := clusterNodes(t, 3)
	a := locktest.NodesT(t, nodes, append(clusterOpts, redlock.WithFencing())...)
	b := locktest.NodesT(t, nodes, clusterOpts...)
	ctx := clusterCtx(t)
	for i := range 12 {
		key := fmt.Sprintf("cluster-key-%d", i)
		// b's connections to the key's master are up before it is
		// refused: a refusal, not a slow first contact.
		warm, err := b.Obtain(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := warm.Release(ctx); err != nil {
			t.Fatal(err)
		}
		k, err := a.Obtain(ctx, key)
		if err != nil {
			t.Fatalf("TryObtain(%q): %v", key, err)
		}
		if k.Fence() == 0 {
			t.Errorf("%q: no fence on a fencing Locker", key)
		}
		if _, err := b.TryObtain(ctx, key); !errors.Is(err, redlock.ErrNotObtained) {
			t.Errorf("a second owner of %q: %v, want ErrNotObtained", key, err)
		}
		// A majority of clusters granted it, on the master that owns the
		// key's slot (the third one's answer may still be on its way).
		onOwner := 0
		for _, c := range clusters {
			owner, err := c.KeyOwner(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			cl := owner.NewClient()
			n, err := cl.Exists(ctx, key).Result()
			_ = cl.Close()
			if err != nil {
				t.Fatal(err)
			}
			onOwner += int(n)
		}
		if onOwner < 2 {
			t.Errorf("%q held on %d slot owners, want a majority of 3", key, onOwner)
		}
		if err := k.Extend(ctx, 10*time.Second); err != nil {
			t.Errorf("Extend(%q): %v", key, err)
		}
		if err := k.Release(ctx); err != nil {
			t.Errorf("Release(%q): %v", key, err)
		}
		k2, err := b.Obtain(ctx, key)
		if err != nil {
			t.Fatalf("%q after its release: %v", key, err)
		}
		if err := k2.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}

// A call on a slot that is moving is sent once, to the master the link's
// map names: a redirect (ASK while the slot migrates, MOVED after) is the
// node's failed vote, never followed. Once the link read the new map, the
// node votes again, on the new master.
func TestClusterRedirectIsAFailedVote(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterT(t, redistest.ClusterOptions{})
	logs := newLogRecords()
	l := locktest.NodesT(t, []redlock.Node{redlock.Cluster(c.ClusterClientT(t))}, append(clusterOpts, redlock.WithLogger(slog.New(logs)))...)
	ctx := clusterCtx(t)
	const key = "moving"
	k, err := l.Obtain(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := c.Nodes[0]
	if to.ID == from.ID {
		to = c.Nodes[1]
	}
	redirected := func(step string, err error, want string) {
		t.Helper()
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) || qe.Nodes[0].Err == nil || !strings.Contains(qe.Nodes[0].Err.Error(), want) {
			t.Errorf("%s: %v, want the node's vote failed by %s", step, err, want)
		}
		// One slot moving says nothing of the node, which answers: no
		// warning that the node is down.
		if n := logs.count("redlock: node down"); n != 0 {
			t.Errorf("%s: %d warnings that the node is down; want none", step, n)
		}
	}
	err = c.MigrateSlot(ctx, slot, to, func(s redistest.MigrationStep) error {
		switch s.Kind {
		case redistest.SlotMigrating:
			// The source no longer has the (free) key: it answers ASK.
			_, err := l.TryObtain(ctx, key)
			redirected("slot migrating", err, "ASK")
		case redistest.SlotAssigned:
			// Unless the link read the map again meanwhile (it does
			// every 5 s), it names the old master, which answers MOVED.
			k, err := l.TryObtain(ctx, key)
			if err != nil {
				redirected("slot moved", err, "MOVED")
				return nil
			}
			t.Log("the link had read the new map: the new master voted")
			return k.Release(ctx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	k, err = l.Obtain(ctx, key)
	if err != nil {
		t.Fatalf("after the move: %v", err)
	}
	cl := to.NewClient()
	defer cl.Close()
	if n, err := cl.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Errorf("the key on the new master: %d, %v", n, err)
	}
	if err := k.Release(ctx); err != nil {
		t.Error(err)
	}
}

// The same cluster given twice would vote twice: NewNodes refuses a seed
// address given twice, and a cluster reached through other seeds is
// refused when its masters are reached.
func TestClusterGivenTwiceIsInvalid(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterT(t, redistest.ClusterOptions{})
	cc := c.ClusterClientT(t)
	if _, err := redlock.NewNodes([]redlock.Node{redlock.Cluster(cc), redlock.Cluster(cc)}); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("one cluster client twice: %v, want ErrInvalid", err)
	}
	server := redis.NewClient(&redis.Options{Addr: c.Nodes[0].Addr})
	defer server.Close()
	if _, err := redlock.NewNodes([]redlock.Node{redlock.Cluster(cc), redlock.Server(server)}); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("a cluster and one of its masters: %v, want ErrInvalid", err)
	}
	seeds := func(i int) redlock.Node {
		cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.Nodes[i].Addr}})
		t.Cleanup(func() { _ = cl.Close() })
		return redlock.Cluster(cl)
	}
	l := locktest.NodesT(t, []redlock.Node{seeds(0), seeds(1)}, clusterOpts...)
	_, err := l.TryObtain(t.Context(), "twice")
	if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "same server") {
		t.Errorf("one cluster through two seeds: %v, want ErrInvalid for the same server twice", err)
	}
}

// A shard that lost its memory (a flush) abstains, under the restart
// guard, for the slots whose marker it lost, and only for those.
func TestClusterGuardQuarantinesAFlushedShard(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterT(t, redistest.ClusterOptions{})
	l := locktest.NodesT(t, []redlock.Node{redlock.Cluster(c.ClusterClientT(t))}, append(clusterOpts, redlock.WithRestartGuard(time.Minute))...)
	ctx := clusterCtx(t)
	if err := l.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	keys := map[string]*redistest.ClusterNode{}
	for i := 0; len(keys) < 6; i++ {
		key := fmt.Sprintf("guarded-%d", i)
		owner, err := c.KeyOwner(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		keys[key] = owner
		k, err := l.Obtain(ctx, key)
		if err != nil {
			t.Fatalf("%q on a bootstrapped cluster: %v", key, err)
		}
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	flushed := c.Nodes[0]
	if err := c.FlushShard(ctx, flushed); err != nil {
		t.Fatal(err)
	}
	for key, owner := range keys {
		_, err := l.TryObtain(ctx, key)
		if owner.ID == flushed.ID {
			var qe *redlock.QuorumError
			if !errors.As(err, &qe) || !errors.Is(qe.Nodes[0].Err, redlock.ErrAbstained) {
				t.Errorf("%q on the flushed shard: %v, want it to abstain", key, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q on a shard that kept its memory: %v", key, err)
		}
	}
}

// On a cluster node, a multi-key lock's keys must share a slot.
func TestClusterMultiKeysShareASlot(t *testing.T) {
	t.Parallel()
	_, nodes := clusterNodes(t, 1)
	l := locktest.NodesT(t, nodes, clusterOpts...)
	ctx := clusterCtx(t)
	if _, err := l.TryObtainMulti(ctx, []string{"order-a", "order-b"}); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "hash tag") {
		t.Errorf("keys of two slots: %v, want ErrInvalid naming hash tags", err)
	}
	k, err := l.ObtainMulti(ctx, []string{"{order}:a", "{order}:b"})
	if err != nil {
		t.Fatalf("keys of one slot: %v", err)
	}
	if err := k.Release(ctx); err != nil {
		t.Error(err)
	}
}

// The semaphore and the read-write lock keep their keys in the name's
// slot, so they work on cluster nodes as on standalone ones; a mixed
// quorum (two standalone servers and a cluster) takes them too.
func TestClusterSemaphoreAndRWMutex(t *testing.T) {
	t.Parallel()
	_, nodes := clusterNodes(t, 1)
	for _, c := range redistest.ClientsT(t, redistest.StartT(t, 2, redistest.Options{})) {
		nodes = append(nodes, redlock.Server(c))
	}
	l := locktest.NodesT(t, nodes, append(clusterOpts, redlock.WithFencing())...)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sem := l.Semaphore("pool", 2)
	p1, err := sem.Obtain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := sem.Obtain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryObtain(ctx); !errors.Is(err, redlock.ErrNotObtained) {
		t.Errorf("a third permit of two: %v, want ErrNotObtained", err)
	}
	for _, p := range []*redlock.Lock{p1, p2} {
		if err := p.Release(ctx); err != nil {
			t.Error(err)
		}
	}
	rw := l.RWMutex("table")
	r, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.TryLock(ctx); !errors.Is(err, redlock.ErrNotObtained) {
		t.Errorf("the writer beside a reader: %v, want ErrNotObtained", err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := rw.TryLock(ctx)
	if err != nil {
		t.Fatalf("the writer alone: %v", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Error(err)
	}
}

// Re-entry, lock-delay, handoff between goroutines, election, Inspect of
// a semaphore and ForceRelease of a read-write lock, on a quorum of one
// cluster and two standalone servers, under the restart guard: what the
// standalone tests show of each holds with a cluster node.
func TestClusterPrimitivesOnAMixedQuorum(t *testing.T) {
	t.Parallel()
	_, nodes := clusterNodes(t, 1)
	for _, c := range redistest.ClientsT(t, redistest.StartT(t, 2, redistest.Options{})) {
		nodes = append(nodes, redlock.Server(c))
	}
	l := locktest.NodesT(t, nodes, append(clusterOpts, redlock.WithFencing(), redlock.WithRestartGuard(time.Minute))...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := l.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}

	// Re-entry by token: a second Lock of the same owner, whose release
	// leaves the first one's hold.
	a, err := l.Obtain(ctx, "reentry", redlock.WithToken("owner-1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Obtain(ctx, "reentry", redlock.WithToken("owner-1"))
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryObtain(ctx, "reentry"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Errorf("another owner while the first hold stays: %v, want ErrNotObtained", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Lock-delay: an expired lock goes to nobody for the delay.
	if _, err := l.Obtain(ctx, "delayed", redlock.WithTTL(1500*time.Millisecond), redlock.WithNodeTimeout(500*time.Millisecond), redlock.WithLockDelay(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // past the TTL: the delay keeps the key
	if _, err := l.TryObtain(ctx, "delayed"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Errorf("within the lock-delay: %v, want ErrNotObtained", err)
	}

	// Election: one leader, whose term is its fence; Leader names it.
	lead, err := l.Campaign(ctx, "election", redlock.WithMetadata("me"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := l.Leader(ctx, "election")
	if err != nil || !info.Leading || info.Metadata != "me" || info.Term != lead.Term() {
		t.Errorf("Leader: %+v, %v; want leading, metadata me, term %d", info, err, lead.Term())
	}
	if err := lead.Resign(ctx); err != nil {
		t.Error(err)
	}

	// A waiter of the same Locker gets the key handed over on release.
	held, err := l.Obtain(ctx, "handoff")
	if err != nil {
		t.Fatal(err)
	}
	got := waiter(t, l, "handoff")
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wokenSoon(t, got, time.Now())

	// Inspect of a semaphore's permits; ForceRelease of a read-write lock.
	sem := l.Semaphore("sem", 3)
	p, err := sem.Obtain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slots, err := sem.Inspect(ctx)
	held1 := 0
	for _, s := range slots {
		if s.Holder == p.Token() {
			held1++
		}
	}
	if err != nil || len(slots) != 3 || held1 != 1 {
		t.Errorf("Inspect of a semaphore with one permit out: %d slots, %d held by it, %v", len(slots), held1, err)
	}
	if err := p.Release(ctx); err != nil {
		t.Error(err)
	}
	rw := l.RWMutex("rw")
	if _, err := rw.TryRLock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rw.ForceRelease(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := rw.TryLock(ctx)
	if err != nil {
		t.Fatalf("the writer after ForceRelease of the reader: %v", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Error(err)
	}
}
