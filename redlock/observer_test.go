package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// opID marks the context an OpStart returned, so that the tests can check
// which operation's context each later event carries.
type opID struct{}

// recorder is an Observer that keeps every event, and lets a test await one.
type recorder struct {
	mu      sync.Mutex
	next    int
	ops     []redlock.OpEvent
	opCtx   []any // the opID that each OpDone's context carried
	waits   []redlock.WaitEvent
	nodes   []redlock.NodeEvent
	nodeCtx []any
	losses  []redlock.LossEvent
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 1)} }

func (r *recorder) note() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) OpStart(ctx context.Context, op redlock.Op, key string) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	return context.WithValue(ctx, opID{}, fmt.Sprintf("%s %s #%d", op, key, r.next))
}

func (r *recorder) OpDone(ctx context.Context, e redlock.OpEvent) {
	r.mu.Lock()
	r.ops = append(r.ops, e)
	r.opCtx = append(r.opCtx, ctx.Value(opID{}))
	r.mu.Unlock()
	r.note()
}

func (r *recorder) Waited(_ context.Context, e redlock.WaitEvent) {
	r.mu.Lock()
	r.waits = append(r.waits, e)
	r.mu.Unlock()
	r.note()
}

func (r *recorder) NodeDone(ctx context.Context, e redlock.NodeEvent) {
	r.mu.Lock()
	r.nodes = append(r.nodes, e)
	r.nodeCtx = append(r.nodeCtx, ctx.Value(opID{}))
	r.mu.Unlock()
	r.note()
}

func (r *recorder) Lost(_ context.Context, e redlock.LossEvent) {
	r.mu.Lock()
	r.losses = append(r.losses, e)
	r.mu.Unlock()
	r.note()
}

// await waits until cond, called with the recorder locked, holds.
func (r *recorder) await(t *testing.T, what string, cond func(r *recorder) bool) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		r.mu.Lock()
		ok := cond(r)
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-timeout.C:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("no %s within 10s; ops %+v; nodes %+v", what, r.ops, r.nodes)
		}
	}
}

// opsOf returns the recorded OpDone events of op, with the opID of each.
func (r *recorder) opsOf(op redlock.Op) (out []redlock.OpEvent, ids []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.ops {
		if e.Op == op {
			out, ids = append(out, e), append(ids, r.opCtx[i])
		}
	}
	return out, ids
}

// nodesOf returns the node events of op, with the opID each one's context
// carried.
func (r *recorder) nodesOf(op redlock.Op) (out []redlock.NodeEvent, ids []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.nodes {
		if e.Op == op {
			out, ids = append(out, e), append(ids, r.nodeCtx[i])
		}
	}
	return out, ids
}

// countNodes counts node events of op with outcome o; call it with r locked.
func (r *recorder) countNodes(op redlock.Op, o redlock.Outcome) int {
	n := 0
	for _, e := range r.nodes {
		if e.Op == op && e.Outcome == o {
			n++
		}
	}
	return n
}

// An obtain, an extension and a release are each seen once, with every
// node's answer in the operation's own context.
func TestObserverSeesObtainExtendRelease(t *testing.T) {
	c := newCluster(t, 3)
	rec := newRecorder()
	l := c.locker(t, redlock.WithObserver(rec), redlock.WithFencing())
	ctx := t.Context()

	lock := mustObtain(t, l, "obs:basic")
	// The round decides at a majority; the last node may answer later.
	rec.await(t, "three obtain node events", func(r *recorder) bool { return r.countNodes(redlock.OpObtain, redlock.OutcomeOK) == 3 })
	if err := lock.Extend(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// A hold time to measure, not a wait for an event.
	const holdAtLeast = 20 * time.Millisecond
	time.Sleep(holdAtLeast)
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rec.await(t, "every node's extend and release", func(r *recorder) bool {
		return r.countNodes(redlock.OpExtend, redlock.OutcomeOK) == 3 && r.countNodes(redlock.OpRelease, redlock.OutcomeOK) == 3
	})

	obtains, ids := rec.opsOf(redlock.OpObtain)
	if len(obtains) != 1 {
		t.Fatalf("obtain events %+v, want one", obtains)
	}
	o := obtains[0]
	if o.Err != nil || o.Key != "obs:basic" || o.Attempts != 1 || o.Latency <= 0 || o.Fence != lock.Fence() || o.Fence == 0 {
		t.Errorf("obtain event %+v, want success on obs:basic after one attempt, latency > 0, fence %d", o, lock.Fence())
	}
	if o.Wait < 0 || o.Wait > o.Latency {
		t.Errorf("obtain wait %v outside [0, latency %v]", o.Wait, o.Latency)
	}
	nodes, nodeIDs := rec.nodesOf(redlock.OpObtain)
	seen := map[string]bool{}
	for i, n := range nodes {
		seen[n.Addr] = true
		if nodeIDs[i] != ids[0] {
			t.Errorf("obtain node event in context %v, want the obtain's %v", nodeIDs[i], ids[0])
		}
		if n.Latency <= 0 || n.Latency > o.Latency+time.Second || n.Err != nil || n.Abstained || n.Key != "obs:basic" {
			t.Errorf("node event %+v", n)
		}
	}
	for _, addr := range l.Nodes() {
		if !seen[addr] {
			t.Errorf("no obtain event from node %s (saw %v)", addr, seen)
		}
	}

	extends, _ := rec.opsOf(redlock.OpExtend)
	if len(extends) != 1 || extends[0].Err != nil || extends[0].Latency <= 0 {
		t.Errorf("extend events %+v, want one success", extends)
	}
	releases, relIDs := rec.opsOf(redlock.OpRelease)
	if len(releases) != 1 || releases[0].Err != nil || releases[0].Held < holdAtLeast {
		t.Fatalf("release events %+v, want one success after a hold of at least %v", releases, holdAtLeast)
	}
	_, relNodeIDs := rec.nodesOf(redlock.OpRelease)
	for _, id := range relNodeIDs {
		if id != relIDs[0] {
			t.Errorf("release node event in context %v, want the release's %v", id, relIDs[0])
		}
	}

	// A second release fails without asking a node, and is seen as such.
	if err := lock.Release(ctx); !errors.Is(err, redlock.ErrReleased) {
		t.Fatalf("second release: %v", err)
	}
	releases, _ = rec.opsOf(redlock.OpRelease)
	if len(releases) != 2 || !errors.Is(releases[1].Err, redlock.ErrReleased) {
		t.Errorf("release events %+v, want a second one with ErrReleased", releases)
	}
	if n, _ := rec.nodesOf(redlock.OpRelease); len(n) != 3 {
		t.Errorf("%d release node events, want 3 (the second release asks no node)", len(n))
	}
}

// A waiter sees the holder's nodes refuse, sleeps (each sleep seen), and
// reports its wait when it gets the lock at the holder's expiry.
func TestObserverSeesContentionAndWait(t *testing.T) {
	c := newCluster(t, 3)
	rec := newRecorder()
	opts := []redlock.Option{redlock.WithNodeTimeout(200 * time.Millisecond), redlock.WithTTL(time.Second)}
	holder := c.locker(t, opts...)
	waiter := c.locker(t, append(opts, redlock.WithObserver(rec))...)
	if _, err := holder.TryObtain(t.Context(), "obs:wait"); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	lock, err := waiter.Obtain(ctx, "obs:wait")
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	defer func() { _ = lock.Release(context.WithoutCancel(ctx)) }()

	obtains, _ := rec.opsOf(redlock.OpObtain)
	if len(obtains) != 1 {
		t.Fatalf("obtain events %+v, want one", obtains)
	}
	o := obtains[0]
	if o.Err != nil || o.Attempts < 2 || o.Latency > took || o.Latency < took/2 {
		t.Errorf("obtain event %+v, want success after several attempts, latency about %v", o, took)
	}
	// The holder's key lived about a second: nearly all of it was waiting.
	if o.Wait < 500*time.Millisecond || o.Wait > o.Latency {
		t.Errorf("obtain wait %v of latency %v, want most of the holder's TTL", o.Wait, o.Latency)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var slept time.Duration
	for _, w := range rec.waits {
		if w.Key != "obs:wait" || w.Duration < 0 {
			t.Errorf("wait event %+v", w)
		}
		slept += w.Duration
	}
	if len(rec.waits) == 0 || slept > o.Wait {
		t.Errorf("wait events %+v (sum %v), want at least one, summing to at most the obtain's wait %v", rec.waits, slept, o.Wait)
	}
	if n := rec.countNodes(redlock.OpObtain, redlock.OutcomeHeldByOther); n < 2 {
		t.Errorf("%d obtain node events held by another, want at least the first round's majority", n)
	}
}

// A dead node is reported with its error, by address; the others grant.
func TestObserverSeesNodeFailure(t *testing.T) {
	c := newCluster(t, 3)
	rec := newRecorder()
	l := c.locker(t, redlock.WithObserver(rec), redlock.WithNodeTimeout(200*time.Millisecond))
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	lock := mustObtain(t, l, "obs:dead")
	defer func() { _ = lock.Release(context.WithoutCancel(t.Context())) }()
	rec.await(t, "the dead node's event", func(r *recorder) bool {
		return r.countNodes(redlock.OpObtain, redlock.OutcomeError) == 1 && r.countNodes(redlock.OpObtain, redlock.OutcomeOK) == 2
	})
	nodes, _ := rec.nodesOf(redlock.OpObtain)
	for _, n := range nodes {
		dead := n.Addr == c.servers[1].Addr
		if dead != (n.Outcome == redlock.OutcomeError) || dead != (n.Err != nil) || (dead != (n.Node == 1)) {
			t.Errorf("node event %+v: only node 1 (%s) is down", n, c.servers[1].Addr)
		}
		if dead && n.Latency > time.Second {
			t.Errorf("the dead node's answer took %v, beyond its node timeout", n.Latency)
		}
	}
	obtains, _ := rec.opsOf(redlock.OpObtain)
	if len(obtains) != 1 || obtains[0].Err != nil {
		t.Errorf("obtain events %+v, want one success", obtains)
	}
}

// Nodes under the restart guard that were never seeded abstain: each is
// seen as an abstention, and the obtain as an outage.
func TestObserverSeesAbstention(t *testing.T) {
	c := newCluster(t, 3)
	rec := newRecorder()
	l := c.locker(t, redlock.WithObserver(rec), redlock.WithRestartGuard(10*time.Second))
	_, err := l.TryObtain(t.Context(), "obs:abstain")
	if !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("TryObtain on unseeded guarded nodes: %v, want ErrNoQuorum", err)
	}
	rec.await(t, "three abstentions", func(r *recorder) bool {
		n := 0
		for _, e := range r.nodes {
			if e.Abstained && e.Outcome == redlock.OutcomeError {
				n++
			}
		}
		return n == 3
	})
	obtains, _ := rec.opsOf(redlock.OpObtain)
	if len(obtains) != 1 || !errors.Is(obtains[0].Err, redlock.ErrNoQuorum) {
		t.Errorf("obtain events %+v, want one ErrNoQuorum", obtains)
	}
}

// A lock broken with ForceRelease is seen as one operation, with every
// node's answer (deleted, or no key there) in its context; a bad key is
// seen failing.
func TestObserverSeesForceRelease(t *testing.T) {
	c := newCluster(t, 3)
	rec := newRecorder()
	l := c.locker(t, redlock.WithObserver(rec))
	// Someone else's lock, on nodes 0 and 1 only.
	for _, cl := range c.clients[:2] {
		if err := cl.Set(t.Context(), "obs:force", "other\x001\x00", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ForceRelease(t.Context(), "obs:force"); err != nil {
		t.Fatal(err)
	}
	// ForceRelease waits for every node, up to the node timeout.
	rec.await(t, "three force-release node events", func(r *recorder) bool {
		return r.countNodes(redlock.OpForceRelease, redlock.OutcomeOK)+r.countNodes(redlock.OpForceRelease, redlock.OutcomeMissing) == 3
	})
	forced, ids := rec.opsOf(redlock.OpForceRelease)
	if len(forced) != 1 || forced[0].Key != "obs:force" || forced[0].Err != nil || forced[0].Latency <= 0 {
		t.Fatalf("force-release events %+v, want one that succeeded", forced)
	}
	nodes, nodeIDs := rec.nodesOf(redlock.OpForceRelease)
	outcomes := map[int]redlock.Outcome{}
	for i, e := range nodes {
		outcomes[e.Node] = e.Outcome
		if nodeIDs[i] != ids[0] {
			t.Errorf("node %d's event carried context %v, want the operation's %v", e.Node, nodeIDs[i], ids[0])
		}
	}
	want := map[int]redlock.Outcome{0: redlock.OutcomeOK, 1: redlock.OutcomeOK, 2: redlock.OutcomeMissing}
	if !reflect.DeepEqual(outcomes, want) {
		t.Errorf("node outcomes %v, want %v", outcomes, want)
	}
	if err := l.ForceRelease(t.Context(), ""); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("ForceRelease of an empty key: %v", err)
	}
	if forced, _ = rec.opsOf(redlock.OpForceRelease); len(forced) != 2 || !errors.Is(forced[1].Err, redlock.ErrInvalid) {
		t.Errorf("force-release events %+v, want the second failing with ErrInvalid", forced)
	}
}

// Do's work is told of a loss, and so is the observer, before the lock's
// validity ends: when another owner took the key, and when a majority of
// the nodes stopped answering (SIGSTOP).
func TestObserverSeesLoss(t *testing.T) {
	opts := []redlock.Option{redlock.WithNodeTimeout(100 * time.Millisecond), redlock.WithTTL(1500 * time.Millisecond)}
	for _, tc := range []struct {
		name   string
		breaks func(t *testing.T, c *cluster, key string)
		reason error
	}{
		{"taken", func(t *testing.T, c *cluster, key string) {
			other := c.locker(t, opts...)
			if err := other.ForceRelease(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			if _, err := other.TryObtain(t.Context(), key); err != nil {
				t.Fatal(err)
			}
		}, redlock.ErrLockLost},
		{"paused", func(t *testing.T, c *cluster, _ string) {
			for _, s := range c.servers[:2] {
				if err := s.Pause(); err != nil {
					t.Fatal(err)
				}
			}
		}, redlock.ErrLockExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3)
			rec := newRecorder()
			l := c.locker(t, append(opts, redlock.WithObserver(rec))...)
			// Registered after the Locker: runs before its Close.
			t.Cleanup(func() {
				for _, s := range c.servers {
					_ = s.Resume()
				}
			})
			key := "obs:loss:" + tc.name
			var until time.Time
			err := l.Do(t.Context(), key, func(ctx context.Context) error {
				tc.breaks(t, c, key)
				<-ctx.Done()
				until = time.Now()
				return nil
			})
			if !errors.Is(err, redlock.ErrLockLost) {
				t.Fatalf("Do: %v, want ErrLockLost", err)
			}
			rec.mu.Lock()
			losses := append([]redlock.LossEvent(nil), rec.losses...)
			rec.mu.Unlock()
			if len(losses) != 1 {
				t.Fatalf("loss events %+v, want one", losses)
			}
			e := losses[0]
			if e.Key != key || !errors.Is(e.Cause, redlock.ErrLockLost) || !errors.Is(e.Cause, tc.reason) || e.Left <= 0 {
				t.Errorf("loss event %+v (told at %v), want cause matching ErrLockLost and %v, before Until", e, until, tc.reason)
			}
			if tc.name == "paused" {
				rec.await(t, "a failed extension", func(r *recorder) bool {
					for _, o := range r.ops {
						if o.Op == redlock.OpExtend && errors.Is(o.Err, redlock.ErrNoQuorum) {
							return true
						}
					}
					return false
				})
			}
		})
	}
}

// WithObserver belongs to New (a call cannot take it: it is no
// LockOption); nil is refused.
func TestObserverOptionChecked(t *testing.T) {
	c := newCluster(t, 1)
	if _, err := redlock.New(c.clients, redlock.WithObserver(nil)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("New with a nil Observer: %v, want ErrInvalid", err)
	}
	if _, ok := redlock.WithObserver(redlock.NopObserver{}).(redlock.LockOption); ok {
		t.Error("WithObserver is a LockOption: a call could take it")
	}
	rec := newRecorder()
	lo := c.locker(t, redlock.WithObserver(rec))
	if _, err := lo.TryObtain(t.Context(), ""); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("TryObtain with an empty key: %v", err)
	}
	obtains, _ := rec.opsOf(redlock.OpObtain)
	if len(obtains) != 1 || !errors.Is(obtains[0].Err, redlock.ErrInvalid) || obtains[0].Attempts != 0 {
		t.Errorf("obtain events %+v, want one ErrInvalid without attempts", obtains)
	}
}

// BenchmarkObserver measures an uncontended TryObtain+Release without an
// observer and with one that does nothing: without, the hooks must cost no
// allocation.
func BenchmarkObserver(b *testing.B) {
	clients := redistest.ClientsT(b, redistest.StartT(b, 3, redistest.Options{}))
	for _, tc := range []struct {
		name string
		opts []redlock.Option
	}{
		{"observer=none", nil},
		{"observer=nop", []redlock.Option{redlock.WithObserver(redlock.NopObserver{})}},
	} {
		b.Run("nodes=3/"+tc.name, func(b *testing.B) {
			l, err := redlock.New(clients, append([]redlock.Option{redlock.WithNodeTimeout(time.Second)}, tc.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			obtainReleaseLoop(b, l, "bench:obs")
		})
	}
}

// A Release that hands the lock to a waiting goroutine of the same Locker
// reports each node's part of the handoff, in the release's context; the
// waiter's obtain counts the handoff as waiting.
func TestObserverSeesHandoff(t *testing.T) {
	c := newCluster(t, 3)
	rec := newRecorder()
	l := c.locker(t, redlock.WithObserver(rec))
	held := mustObtain(t, l, "obs:handoff")
	got := obtainAsync(t.Context(), l, "obs:handoff", slowRetry)
	awaitOffer(t, l, "obs:handoff")
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	defer func() { _ = r.lock.Release(context.WithoutCancel(t.Context())) }()
	rec.await(t, "three handoff node events", func(r *recorder) bool { return r.countNodes(redlock.OpHandoff, redlock.OutcomeOK) == 3 })
	releases, relIDs := rec.opsOf(redlock.OpRelease)
	if len(releases) != 1 || releases[0].Err != nil {
		t.Fatalf("release events %+v, want the handoff's release", releases)
	}
	_, ids := rec.nodesOf(redlock.OpHandoff)
	for _, id := range ids {
		if id != relIDs[0] {
			t.Errorf("handoff node event in context %v, want the release's %v", id, relIDs[0])
		}
	}
	obtains, _ := rec.opsOf(redlock.OpObtain)
	if len(obtains) != 2 || obtains[1].Err != nil || obtains[1].Wait <= 0 {
		t.Errorf("obtain events %+v, want the holder's and the waiter's, which waited", obtains)
	}
}

// printer prints what a Locker did; a real Observer would feed metrics or
// traces (see the redlockotel module).
type printer struct{ redlock.NopObserver }

func (printer) OpDone(_ context.Context, e redlock.OpEvent) {
	outcome := "ok"
	if e.Err != nil {
		outcome = e.Err.Error()
	}
	switch e.Op {
	case redlock.OpObtain:
		// e.Attempts and e.Latency say how hard it was (a slow node can
		// cost an attempt, so the example leaves them out of its output).
		fmt.Printf("obtain %s: %s\n", e.Key, outcome)
	case redlock.OpRelease:
		fmt.Printf("release %s: %s, held %v\n", e.Key, outcome, e.Held > 0)
	}
}

func ExampleWithObserver() {
	var clients []*redis.Client
	for _, addr := range exampleAddrs { // three Redis masters
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients = append(clients, c)
	}
	locker, err := redlock.New(clients, redlock.WithObserver(printer{}))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	ctx := context.Background()
	lock, err := locker.Obtain(ctx, "example:observer")
	if err != nil {
		log.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// obtain example:observer: ok
	// release example:observer: ok, held true
}

// A multi-key lock is seen as one: its acquisition under its name (the keys
// joined by commas) with every node's answer in its context, including one
// that had to wait for a holder of one of its keys, and its release.
func TestObserverSeesMultiKeyLock(t *testing.T) {
	c := newCluster(t, 3)
	rec := newRecorder()
	l := c.locker(t, redlock.WithObserver(rec))
	ctx := t.Context()

	blocker := mustObtain(t, l, "obs:m2")
	if _, err := l.TryObtainMulti(ctx, []string{"obs:m1", "obs:m2"}); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryObtainMulti over a held key: %v, want ErrNotObtained", err)
	}
	if err := blocker.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lock, err := l.ObtainMulti(ctx, []string{"obs:m1", "obs:m2"}, redlock.WithRetry(redlock.LinearBackoff(5*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A multi-key lock and a lock of one key go out on different queues,
	// so a slow node can see the try before the blocker's grant, or after
	// its release, and grant it; the try's clean-up (not an observed
	// release) then removes it, and a release there finds another's token
	// or nothing. So wait for the nodes to be empty and for every node's
	// answer to both releases, of which each release's majority is ok.
	if !c.emptied(t, "obs:m1", "obs:m2") {
		t.Fatalf("nodes keep obs:m1 %q, obs:m2 %q after the release", c.values(t, "obs:m1"), c.values(t, "obs:m2"))
	}
	rec.await(t, "every node's answer to both releases, a majority of each ok", func(r *recorder) bool {
		answers := 0
		for _, e := range r.nodes {
			if e.Op == redlock.OpRelease {
				answers++
			}
		}
		return answers == 2*3 && r.countNodes(redlock.OpRelease, redlock.OutcomeOK) >= 2*2
	})
	obtains, ids := rec.opsOf(redlock.OpObtain)
	if len(obtains) != 3 {
		t.Fatalf("obtain events %+v, want the blocker's, the try's and the multi-key lock's", obtains)
	}
	try, got := obtains[1], obtains[2]
	if try.Key != "obs:m1,obs:m2" || !errors.Is(try.Err, redlock.ErrNotObtained) || try.Attempts != 1 {
		t.Errorf("try event %+v, want ErrNotObtained on obs:m1,obs:m2 after one attempt", try)
	}
	if got.Key != "obs:m1,obs:m2" || got.Err != nil || got.Attempts < 1 || got.Latency <= 0 {
		t.Errorf("multi-key obtain event %+v, want success on obs:m1,obs:m2", got)
	}
	nodes, nodeIDs := rec.nodesOf(redlock.OpObtain)
	byOp := map[any]int{}
	for i, n := range nodes {
		byOp[nodeIDs[i]]++
		if nodeIDs[i] != ids[0] && n.Key != "obs:m1,obs:m2" {
			t.Errorf("node event %+v of a multi-key obtain, want key obs:m1,obs:m2", n)
		}
	}
	for i, id := range ids[1:] {
		if byOp[id] == 0 {
			t.Errorf("no node event in the context of obtain event %+v", obtains[i+1])
		}
	}
	releases, _ := rec.opsOf(redlock.OpRelease)
	if len(releases) != 2 || releases[1].Key != "obs:m1,obs:m2" || releases[1].Err != nil {
		t.Errorf("release events %+v, want the multi-key lock's second", releases)
	}
}
