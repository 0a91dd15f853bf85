package redlock_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// The restart guard against every way a node forgets a lock it granted
// while keeping its memory marker: A holds a lock on three nodes, two of
// them forget it, and B tries to take the lock while A's is still valid.

// guardOpts give the locks of these tests a TTL the forgetful nodes' abstention
// outlasts, and node timeouts generous enough for a loaded machine.
var guardOpts = []redlock.Option{
	redlock.WithRestartGuard(10 * time.Second),
	redlock.WithTTL(10 * time.Second),
	redlock.WithNodeTimeout(time.Second),
}

const markerKey = "redlock:guard:marker"

// secondClientKeptOut checks that B's attempt failed because nodes
// abstained, while A's lock is still valid.
func secondClientKeptOut(t *testing.T, a *redlock.Lock, bErr error, why string) {
	t.Helper()
	if !a.Valid() {
		t.Fatalf("the first lock expired before the second client tried (slow machine?): the test shows nothing")
	}
	if bErr == nil {
		t.Fatalf("a second client got the lock while the first is valid, after %s", why)
	}
	// The node that still holds A's key says No, so the outcome may read
	// as contention; a forgetful node that abstained decided it.
	if !(errors.Is(bErr, redlock.ErrNoQuorum) || errors.Is(bErr, redlock.ErrNotObtained)) || !strings.Contains(bErr.Error(), "it lost its memory") {
		t.Fatalf("after %s: %v, want a refusal from abstaining nodes", why, bErr)
	}
}

// hasMarker fails the test unless node i still has its marker: the
// scenarios below are about nodes that forget locks but keep the marker.
func (c *cluster) hasMarker(t *testing.T, i int) {
	t.Helper()
	if c.value(t, i, markerKey) == "" {
		t.Fatalf("node %d has no marker: the scenario is the one the guard always caught", i)
	}
}

func TestRestartGuardSnapshotReload(t *testing.T) {
	c := newCluster(t, 3)
	a, b := c.bootstrapped(t), c.locker(t, guardOpts...)
	// Redis's default persistence: an RDB snapshot, taken before the lock.
	for _, cl := range c.clients[:2] {
		if err := cl.Save(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lock := mustObtain(t, a, "k")
	for i, s := range c.servers[:2] {
		if err := s.Restart(); err != nil { // reloads the snapshot
			t.Fatal(err)
		}
		c.hasMarker(t, i)
	}
	_, err := b.TryObtain(t.Context(), "k")
	secondClientKeptOut(t, lock, err, "two of three nodes restarted from a snapshot older than the lock")
}

func TestRestartGuardAOFLostTail(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{Args: []string{"--appendonly", "yes", "--appendfsync", "everysec"}})
	c := &cluster{servers: servers, clients: redistest.ClientsT(t, servers)}
	a, b := c.bootstrapped(t), c.locker(t, guardOpts...)
	crash := []func(){servers[0].CheckpointT(t), servers[1].CheckpointT(t)}
	lock := mustObtain(t, a, "k")
	// A power loss takes the last second of appendfsync everysec with it.
	for i := range crash {
		crash[i]()
		c.hasMarker(t, i)
	}
	_, err := b.TryObtain(t.Context(), "k")
	secondClientKeptOut(t, lock, err, "two of three nodes lost the tail of their AOF")
}

func TestRestartGuardPromotedReplica(t *testing.T) {
	c := newCluster(t, 3)
	a := c.bootstrapped(t)
	// Replicas of nodes 0 and 1 have the markers, then lose their links
	// (a partition) before A's grant.
	replicas := []*redistest.Replica{
		redistest.StartReplicaT(t, c.servers[0], redistest.Options{}),
		redistest.StartReplicaT(t, c.servers[1], redistest.Options{}),
	}
	for _, r := range replicas {
		if err := r.Cut(); err != nil {
			t.Fatal(err)
		}
	}
	lock := mustObtain(t, a, "k")
	// Failover: the replicas become the masters of nodes 0 and 1.
	failed := &cluster{servers: []*redistest.Server{replicas[0].Server, replicas[1].Server, c.servers[2]}}
	failed.clients = redistest.ClientsT(t, failed.servers)
	for i, r := range replicas {
		if err := r.Promote(t.Context()); err != nil {
			t.Fatal(err)
		}
		failed.hasMarker(t, i)
	}
	b := failed.locker(t, guardOpts...)
	_, err := b.TryObtain(t.Context(), "k")
	secondClientKeptOut(t, lock, err, "two of three nodes failed over to replicas that missed the grant")
}

// FLUSHALL removes the marker with the locks: the guard has always seen it.
func TestRestartGuardFlushAll(t *testing.T) {
	c := newCluster(t, 3)
	a, b := c.bootstrapped(t), c.locker(t, guardOpts...)
	lock := mustObtain(t, a, "k")
	for _, cl := range c.clients[:2] {
		if err := cl.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.TryObtain(t.Context(), "k")
	secondClientKeptOut(t, lock, err, "two of three nodes were flushed")
}

// evict fills node cl with keys that have a TTL until key is evicted.
func evict(t *testing.T, cl *redis.Client, key string) {
	t.Helper()
	ctx := t.Context()
	value := strings.Repeat("x", 16<<10)
	for batch := range 200 {
		pl := cl.Pipeline()
		for i := range 32 {
			pl.Set(ctx, fmt.Sprintf("filler:%d:%d", batch, i), value, 10*time.Minute)
		}
		if _, err := pl.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := cl.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatalf("%s still there after 100MB of fillers", key)
}

var evicting = []string{"--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru"}

// A node that may evict lock keys never votes under the guard: Bootstrap
// and every acquisition are told why.
func TestRestartGuardEvictionPolicy(t *testing.T) {
	servers := append(redistest.StartT(t, 2, redistest.Options{Args: evicting}), redistest.StartT(t, 1, redistest.Options{})...)
	c := &cluster{servers: servers, clients: redistest.ClientsT(t, servers)}
	a, b := c.locker(t, guardOpts...), c.locker(t, guardOpts...)
	berr := a.Bootstrap(t.Context())
	lock, err := a.TryObtain(t.Context(), "k")
	if err == nil {
		// Show what the guard must prevent: the lock keys are evicted.
		for _, cl := range c.clients[:2] {
			evict(t, cl, "k")
		}
		_, err := b.TryObtain(t.Context(), "k")
		if err == nil && lock.Valid() {
			t.Fatal("a second client got the lock while the first is valid, after two of three nodes evicted its key")
		}
		t.Fatalf("nodes with maxmemory-policy volatile-lru granted a lock (Bootstrap: %v)", berr)
	}
	const why = "node abstains: maxmemory-policy volatile-lru may evict lock keys"
	if !errors.Is(err, redlock.ErrNoQuorum) || strings.Count(err.Error(), why) != 2 {
		t.Errorf("TryObtain on two evicting nodes: %v, want ErrNoQuorum with %q twice", err, why)
	}
	if !errors.Is(berr, redlock.ErrNoQuorum) || strings.Count(berr.Error(), why) != 2 {
		t.Errorf("Bootstrap of two evicting nodes: %v, want ErrNoQuorum with %q twice", berr, why)
	}
}

// A node that evicted keys while it was allowed to, then was set back to
// noeviction, has forgotten locks: its evicted_keys count tells.
func TestRestartGuardEvictedKeys(t *testing.T) {
	c := newCluster(t, 3)
	a, b := c.bootstrapped(t), c.locker(t, guardOpts...)
	lock := mustObtain(t, a, "k")
	for i, cl := range c.clients[:2] {
		configSet(t, cl, "maxmemory-policy", "volatile-lru", "maxmemory", "4mb")
		evict(t, cl, "k")
		configSet(t, cl, "maxmemory", "0", "maxmemory-policy", "noeviction")
		c.hasMarker(t, i)
	}
	_, err := b.TryObtain(t.Context(), "k")
	secondClientKeptOut(t, lock, err, "two of three nodes evicted its key (under a policy since undone)")
}

func configSet(t *testing.T, cl *redis.Client, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if err := cl.ConfigSet(t.Context(), kv[i], kv[i+1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Bootstrap never seeds over a loss: a node whose marker comes from another
// server run abstains, whether or not the Locker knows the guard's maximum
// TTL, and keeps abstaining for acquisitions.
func TestBootstrapKeepsLossOfReloadedNode(t *testing.T) {
	tests := []struct {
		name string
		opts []redlock.Option
		want string
	}{
		{"with the guard", guardOpts, "abstains for"},
		{"without the guard", nil, "node abstains: node lost its memory since its marker was set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, 3)
			if err := c.locker(t, guardOpts...).Bootstrap(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := c.clients[0].Save(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.servers[0].Restart(); err != nil {
				t.Fatal(err)
			}
			c.hasMarker(t, 0)
			err := c.locker(t, tt.opts...).Bootstrap(t.Context())
			var qe *redlock.QuorumError
			if !errors.Is(err, redlock.ErrNoQuorum) || !errors.As(err, &qe) || qe.Nodes[0].Outcome != redlock.OutcomeError ||
				!errors.Is(qe.Nodes[0].Err, redlock.ErrAbstained) ||
				!strings.Contains(qe.Nodes[0].Err.Error(), tt.want) || qe.Nodes[1].Outcome != redlock.OutcomeOK {
				t.Fatalf("Bootstrap after node 0 reloaded its snapshot: %v, want node 0 reported (%q)", err, tt.want)
			}
			// The node still abstains: the acquisition finds the loss, or
			// the quarantine Bootstrap started.
			guarded := c.locker(t, guardOpts...)
			lock, err := guarded.TryObtain(t.Context(), "k")
			if err != nil {
				t.Fatal(err) // nodes 1 and 2 are a majority
			}
			if n := c.holders(t, "k", lock.Token()); n != 2 {
				t.Fatalf("lock on %d nodes, want 2 (node 0 abstains)", n)
			}
		})
	}
}

// A process restart costs a node the guard's maximum TTL even with
// appendfsync always: the run_id cannot tell a clean restart from a lossy
// one. The node is back after that time.
func TestRestartGuardPersistentRestartAbstainsOnce(t *testing.T) {
	servers := redistest.StartT(t, 1, redistest.Options{Persistent: true})
	clients := redistest.ClientsT(t, servers)
	maxTTL := 2 * time.Second
	l := newLocker(t, clients, redlock.WithRestartGuard(maxTTL), redlock.WithTTL(maxTTL))
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "it lost its memory") {
		t.Fatalf("right after a restart: %v, want the node to abstain", err)
	}
	start := time.Now()
	lock, err := l.Obtain(redistest.BoundedCtx(t), "k", redlock.WithRetry(redlock.LinearBackoff(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 5*maxTTL {
		t.Fatalf("node abstained for %v, want about %v", waited, maxTTL)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Fences keep growing when every node reloads a snapshot that holds older
// counters: a counter that went back starts again from the server's clock,
// and the guard kept the node out for its maximum TTL meanwhile.
func TestFencesGrowAcrossSnapshotReload(t *testing.T) {
	c := newCluster(t, 3)
	maxTTL := 2 * time.Second
	l := c.locker(t, redlock.WithFencing(), redlock.WithRestartGuard(maxTTL), redlock.WithTTL(maxTTL))
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	first := mustObtain(t, l, "f")
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, cl := range c.clients {
		if err := cl.Save(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	var last uint64
	for range 5 {
		lock := mustObtain(t, l, "f")
		last = lock.Fence()
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range c.servers {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	// The reload must have put a majority's counters back below the last
	// fence, or the test would prove nothing: each node of the last grant's
	// majority answered at most that fence and reloaded a value from before
	// it. A node that answered its first grant late may have started its
	// counter from a later clock reading and stay above: that is safe.
	var behind []uint64
	for i := range c.clients {
		// A node that never counted before the snapshot (it answered the
		// first grant too late, on a loaded machine) has no counter: 0.
		v, got := c.value(t, i, "redlock:fence:f"), uint64(0)
		if v != "" {
			var err error
			if got, err = strconv.ParseUint(v, 10, 64); err != nil {
				t.Fatalf("node %d's counter after the reload: %v", i, err)
			}
		}
		if got < last {
			behind = append(behind, got)
		}
	}
	if len(behind) < len(c.clients)/2+1 {
		t.Fatalf("after the reload %d nodes' counters are below the last fence %d (%v), want a majority", len(behind), last, behind)
	}
	next, err := l.Obtain(redistest.BoundedCtx(t), "f", redlock.WithRetry(redlock.LinearBackoff(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if next.Fence() <= last {
		t.Fatalf("fence %d after %d: counters rolled back by a snapshot reload made fences go back", next.Fence(), last)
	}
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestRestartGuardOptions(t *testing.T) {
	c := newCluster(t, 1)
	if _, err := redlock.New(c.clients, redlock.WithRestartGuard(time.Second), redlock.WithTTL(2*time.Second)); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("TTL above the guard: %v", err)
	}
	if _, err := redlock.New(c.clients, redlock.WithRestartGuard(0)); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("zero guard: %v", err)
	}
	l := newLocker(t, c.clients, redlock.WithRestartGuard(time.Minute))
	if _, err := l.TryObtain(t.Context(), "k", redlock.WithTTL(2*time.Minute)); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "restart guard") {
		t.Fatalf("per-call TTL above the guard: %v", err)
	}
	// A call cannot take the guard: the compiler refuses an Option where a
	// LockOption is wanted.
	if _, ok := redlock.WithRestartGuard(time.Hour).(redlock.LockOption); ok {
		t.Fatal("WithRestartGuard is a LockOption: a call could change the cluster's guard")
	}
}

func TestRestartGuardFreshClusterAbstainsUntilBootstrap(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithRestartGuard(time.Minute), redlock.WithTTL(10*time.Second))
	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "node abstains") {
		t.Fatalf("fresh guarded cluster: %v, want ErrNoQuorum from abstaining nodes", err)
	}
	// Bootstrap does not end a quarantine already started: the nodes that
	// noticed a loss keep abstaining, and Bootstrap says so.
	if err := l.Bootstrap(t.Context()); !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "abstains") {
		t.Fatalf("Bootstrap of quarantined nodes: %v, want them reported", err)
	}
	if _, err := l.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("after Bootstrap of quarantined nodes: %v", err)
	}
	// A cluster seeded before first use votes at once.
	c2 := newCluster(t, 3)
	l2 := c2.locker(t, redlock.WithRestartGuard(time.Minute), redlock.WithTTL(10*time.Second))
	if err := l2.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	lock := mustObtain(t, l2, "k")
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestRestartGuardKeepsSecondClientOut(t *testing.T) {
	maxTTL := time.Second
	_, b, err := restartTwoEmpty(t, redlock.WithRestartGuard(maxTTL))
	if err == nil {
		t.Fatal("with the restart guard a second client got the lock after two of three nodes restarted empty")
	}
	if !errors.Is(err, redlock.ErrNoQuorum) && !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v", err)
	}
	// After the maximum TTL the restarted nodes vote again.
	start := time.Now()
	lock, err := b.Obtain(redistest.BoundedCtx(t), "k", redlock.WithRetry(redlock.LinearBackoff(50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > 3*maxTTL {
		t.Fatalf("nodes abstained for %v, want about %v", waited, maxTTL)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The known weakness that the guard closes, asserted so that the guard's
// tests above show something: without the guard, two of three nodes that
// restarted empty grant a second lock (the first, of a 1 s TTL, is
// usually still valid then; the guarded test above checks that it is).
func TestWithoutRestartGuardSecondClientGetsIn(t *testing.T) {
	_, _, err := restartTwoEmpty(t)
	if err != nil {
		t.Fatalf("without the guard, after two of three nodes restarted empty: %v; want the second client to get the lock", err)
	}
}

// The way out of a guarded acquisition made before Bootstrap: Bootstrap
// with ClearQuarantine ends the quarantine it started, but only once no
// node holds a lock key; while one does, it is refused and clears nothing.
func TestRestartGuardClearQuarantine(t *testing.T) {
	c := newCluster(t, 3)
	guarded := c.locker(t, redlock.WithRestartGuard(time.Minute), redlock.WithTTL(10*time.Second))
	if _, err := guarded.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "node abstains") {
		t.Fatalf("fresh guarded cluster: %v, want ErrNoQuorum from abstaining nodes", err)
	}
	// Plain Bootstrap leaves the quarantine, and says so (naming no key:
	// it has none).
	if err := guarded.Bootstrap(t.Context()); err == nil || !strings.Contains(err.Error(), "no quorum: bootstrap: 0 of 3 nodes ok") {
		t.Fatalf("Bootstrap of quarantined nodes: %v", err)
	}
	// A lock held without the guard, with metadata that holds a NUL.
	plain := c.locker(t)
	held := mustObtain(t, plain, "held", redlock.WithMetadata("job\x00 7"))
	err := guarded.Bootstrap(t.Context(), redlock.ClearQuarantine())
	if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), `"held"`) {
		t.Fatalf("ClearQuarantine while a lock is held: %v; want ErrInvalid naming the key", err)
	}
	if _, err := guarded.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "node abstains") {
		t.Fatalf("after a refused ClearQuarantine: %v; want the nodes still abstaining", err)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !c.emptied(t, "held") {
		t.Fatal("the released lock's keys stayed")
	}
	// Keys that are not locks do not stand in the way.
	if err := c.clients[0].Set(t.Context(), "other", "data", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := guarded.Bootstrap(t.Context(), redlock.ClearQuarantine()); err != nil {
		t.Fatalf("ClearQuarantine with no lock held: %v", err)
	}
	lock := mustObtain(t, guarded, "k")
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Plain Bootstrap finds every marker in place.
	if err := guarded.Bootstrap(t.Context()); err != nil {
		t.Fatalf("Bootstrap after clearing: %v", err)
	}
}

// A node that abstains says so as a type, not as text: its error matches
// ErrAbstained, in the QuorumError's nodes and to an Observer, and its
// words carry no script reply code.
func TestAbstentionIsTyped(t *testing.T) {
	c := newCluster(t, 3)
	events := make(chan redlock.NodeEvent, 100)
	l := c.locker(t, redlock.WithRestartGuard(time.Minute), redlock.WithObserver(nodeAnswers{ch: events}))
	_, err := l.TryObtain(t.Context(), "k") // never bootstrapped: every node abstains
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNoQuorum) || !errors.As(err, &qe) {
		t.Fatalf("fresh guarded nodes: %v, want ErrNoQuorum with each node's outcome", err)
	}
	abstained := 0
	for _, n := range qe.Nodes {
		switch {
		case n.Outcome == redlock.OutcomeNoReply:
			// Not needed: two abstentions decided the round.
		case !errors.Is(n.Err, redlock.ErrAbstained):
			t.Errorf("node %s: %v, want ErrAbstained", n.Addr, n.Err)
		default:
			abstained++
		}
	}
	if abstained < 2 {
		t.Errorf("%d nodes abstained, want at least 2", abstained)
	}
	if strings.Contains(err.Error(), "ABSTAIN") {
		t.Errorf("the error shows the reply code: %v", err)
	}
	for range 2 {
		if e := <-events; !e.Abstained || !errors.Is(e.Err, redlock.ErrAbstained) {
			t.Errorf("observed %+v, want an abstention", e)
		}
	}
}
