package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// Nodes that answer different fences need the write-back before the lock
// is handed out: here the granting majority is nodes 1 and 2, node 1's
// counter far ahead of node 2's, and the next holder's majority is nodes 0
// and 2. Only the write-back to node 2 can make the next fence larger.
func TestFenceWrittenBackWhenNodesDisagree(t *testing.T) {
	const counter = "redlock:fence:k"
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithFencing())
	now, err := c.clients[1].Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	// About 11 days ahead of the servers' clock, in its microseconds.
	ahead := now.UnixMicro() + 1_000_000_000_000
	if err := c.clients[1].Set(t.Context(), counter, ahead, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	other := func(t *testing.T, node int) func() {
		t.Helper()
		if err := c.clients[node].Set(t.Context(), "k", "other\x001\x00", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := c.clients[node].Del(t.Context(), "k").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}

	free := other(t, 0) // the first majority is nodes 1 and 2
	first := mustObtain(t, l, "k")
	if first.Fence() != uint64(ahead+1) {
		t.Fatalf("fence %d, want node 1's counter plus one, %d", first.Fence(), ahead+1)
	}
	// A re-entry reads the same fence back from a majority.
	again := mustObtain(t, l, "k", redlock.WithToken(first.Token()))
	if again.Fence() != first.Fence() {
		t.Fatalf("re-entry fence %d, want %d", again.Fence(), first.Fence())
	}
	for _, lock := range []*redlock.Lock{again, first} {
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	free()

	other(t, 1) // the next majority is nodes 0 and 2
	next := mustObtain(t, l, "k")
	if next.Fence() <= first.Fence() {
		t.Fatalf("next holder's fence %d, not above %d", next.Fence(), first.Fence())
	}
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The same, with every write-back to nodes 0 and 2 lost on its way: the
// first holder's fence reaches no majority, so it must not get the lock;
// had it got it, the next holder (nodes 0 and 2) would get a smaller fence.
func TestFenceNotHandedOutWithoutWriteBack(t *testing.T) {
	const counter = "redlock:fence:k"
	fenceSHA := scriptSHA(t, "scripts/fence.lua")
	servers := redistest.StartT(t, 3, redistest.Options{})
	wires := []*wire{newWire(t, servers[0]), newWire(t, servers[1]), newWire(t, servers[2])}
	wires[0].lose, wires[2].lose = fenceSHA, fenceSHA
	clients := make([]*redis.Client, len(wires))
	for i, w := range wires {
		clients[i] = w.Client
	}
	direct := redistest.ClientsT(t, servers)
	l := newLocker(t, clients, redlock.WithFencing())

	now, err := direct[1].Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := now.UnixMicro() + 1_000_000_000_000
	if err := direct[1].Set(t.Context(), counter, ahead, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := direct[0].Set(t.Context(), "k", "other\x001\x00", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	first, err := l.TryObtain(t.Context(), "k")
	if err != nil && !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("TryObtain: %v, want ErrNoQuorum (the fence reached no majority)", err)
	}
	// The write-backs go out (and are lost) before the lock is handed
	// out, or else soon after.
	for _, w := range []*wire{wires[0], wires[2]} {
		lost := func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.lost > 0 }
		if !poll(t, 10*time.Second, lost) {
			t.Fatal("no write-back was sent")
		}
		w.mu.Lock()
		w.lose = nil
		w.mu.Unlock()
	}
	// A first holder's keys end as if they expired (its connections may
	// wait for lost writes).
	for _, cl := range direct {
		if err := cl.Del(t.Context(), "k").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := direct[1].Set(t.Context(), "k", "other\x001\x00", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// Retried: a connection that lost a write is replaced after the node
	// timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	next, err := l.Obtain(ctx, "k", redlock.WithRetry(redlock.LinearBackoff(100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	if first != nil && next.Fence() <= first.Fence() {
		t.Fatalf("next holder's fence %d, not above the first holder's %d", next.Fence(), first.Fence())
	}
}

// scriptSHA is the hash by which the Locker calls the script in file.
func scriptSHA(t *testing.T, file string) []byte {
	t.Helper()
	return []byte(redlock.ScriptSHA(strings.TrimPrefix(file, "scripts/")))
}

// Uncontended, the nodes that answer after the majority grant the same
// fence as the majority did: no write-back is sent to them, as it would
// change nothing. (Each acquisition used to send one to every node that
// had not answered when the round was decided: two per acquisition on five
// nodes.) The counters start equal and far ahead of the clock, so that
// every grant counts on from them and no 100 ms window of the clock can end
// between two nodes' grants.
func TestFenceNoWriteBackWhereNodesAgree(t *testing.T) {
	const n = 40
	fenceSHA := scriptSHA(t, "scripts/fence.lua")
	servers := redistest.StartT(t, 5, redistest.Options{})
	direct := redistest.ClientsT(t, servers)
	now, err := direct[0].Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := now.UnixMicro() + 1_000_000_000_000
	for _, c := range direct {
		if err := c.Set(t.Context(), "redlock:fence:k", ahead, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	wires, clients := newWires(t, servers)
	for _, w := range wires {
		w.mark = fenceSHA
	}
	l, err := redlock.New(clients, redlock.WithFencing(), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		lock := mustObtain(t, l, "k")
		if want := uint64(ahead + 1 + int64(i)); lock.Fence() != want {
			t.Fatalf("fence %d, want %d", lock.Fence(), want)
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Close waits for the write-backs still on their way.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	total := markedCalls(wires)
	// None is needed; a node that failed to answer in time would get one.
	t.Logf("%d fence write-backs in %d acquisitions on 5 nodes", total, n)
	if total > n/4 {
		t.Fatalf("%d fence write-backs in %d uncontended acquisitions, want none (at most %d)", total, n, n/4)
	}
}

// A fresh key's first fence needs no write-back either: a counter that is
// gone starts from the start the client offers every node, as one that
// exists does, so the nodes agree (each used to start from its own exact
// clock, and every fresh key's acquisition took a second round, with a
// nonce key left on every node). Sequential, on fresh keys, with fences
// growing per key after an expiry too.
func TestFenceFreshKeysNeedNoWriteBack(t *testing.T) {
	const n, life = 40, 200 * time.Millisecond
	fenceSHA := scriptSHA(t, "scripts/fence.lua")
	servers := redistest.StartT(t, 5, redistest.Options{})
	direct := redistest.ClientsT(t, servers)
	wires, clients := newWires(t, servers)
	for _, w := range wires {
		w.mark = fenceSHA
	}
	l, err := redlock.New(clients, redlock.WithFencing(), redlock.WithNodeTimeout(time.Second), redlock.WithTTL(3*time.Second), redlock.WithShortFenceLifetime(life))
	if err != nil {
		t.Fatal(err)
	}
	first := make([]uint64, n)
	for i := range n {
		lock := mustObtain(t, l, fmt.Sprintf("fresh-%d", i))
		first[i] = lock.Fence()
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Close waits for the write-backs still on their way.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	total := markedCalls(wires)
	t.Logf("%d fence write-backs in %d acquisitions of fresh keys on 5 nodes", total, n)
	if total > n/4 {
		t.Fatalf("%d fence write-backs in %d acquisitions of fresh keys, want none (at most %d)", total, n, n/4)
	}
	// Once the counters expired, each key's next fence is above its first.
	if !poll(t, 10*time.Second, func() bool { return slices.Max(dbSizes(t, direct)) == 0 }) {
		t.Fatalf("keys per node %v long after the counters' lifetime", dbSizes(t, direct))
	}
	again := newLocker(t, direct, redlock.WithFencing(), redlock.WithShortFenceLifetime(life))
	for i := range n {
		lock := mustObtain(t, again, fmt.Sprintf("fresh-%d", i))
		if lock.Fence() <= first[i] {
			t.Fatalf("key %d: fence %d after %d, once its counters expired", i, lock.Fence(), first[i])
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A node that grants after the decision, with a counter of its own far
// ahead of the majority's, keeps its counter: a counter never goes back, so
// the write-back cannot lower it. It gets the lock's fence in its hold
// instead (what Leader reads as a term), and a re-entry's fence is never
// below the outer's.
func TestFenceWrittenBackToLateNode(t *testing.T) {
	const counter = "redlock:fence:k"
	servers := redistest.StartT(t, 3, redistest.Options{})
	direct := redistest.ClientsT(t, servers)
	slow := gatedWire(t, servers[2])
	defer slow.open()
	l := newLocker(t, []*redis.Client{direct[0], direct[1], slow.Client}, redlock.WithFencing())

	now, err := direct[0].Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := now.UnixMicro() + 1_000_000_000_000
	for i, c := range direct {
		v := ahead
		if i == 2 {
			v += 1000
		}
		if err := c.Set(t.Context(), counter, v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	lock := mustObtain(t, l, "k") // nodes 0 and 1; node 2's call is held
	if lock.Fence() != uint64(ahead+1) {
		t.Fatalf("fence %d, want %d", lock.Fence(), ahead+1)
	}
	slow.open() // node 2 grants now, with its own count, ahead+1001
	hold := fmt.Sprintf("\x001:%d\x00", lock.Fence())
	written := func() bool {
		v, err := direct[2].Get(t.Context(), "k").Result()
		return err == nil && strings.Contains(v, hold)
	}
	if !poll(t, 10*time.Second, written) {
		v, err := direct[2].Get(t.Context(), "k").Result()
		t.Fatalf("late node's value %q (%v), want its hold to carry the fence %d", v, err, lock.Fence())
	}
	if v, err := direct[2].Get(t.Context(), counter).Int64(); err != nil || v != ahead+1001 {
		t.Fatalf("late node's counter %d (%v), want its own count %d: a counter never goes back", v, err, ahead+1001)
	}
	again := mustObtain(t, l, "k", redlock.WithToken(lock.Token()))
	if again.Fence() < lock.Fence() {
		t.Fatalf("re-entry fence %d, below the outer's %d", again.Fence(), lock.Fence())
	}
}

// Nodes whose grants of one acquisition fall on both sides of the start of
// one of their clocks' 100 ms windows answer the same fence all the same:
// the client offers every node the same start for the counter. Node 2 is
// held by another, so the majority is nodes 0 and 1, and node 1's grant is
// held on its way until the servers' clock has passed the start of the
// window that node 0 granted in. (Each node used to start its counter from
// its own window's start: node 1 then counted a window more, and node 0
// needed a write-back, as every acquisition did whose replies were spread
// over a window's turn, most of them under deep queues.)
func TestFenceNodesAgreeAcrossAWindow(t *testing.T) {
	const rounds = 3
	acquireSHA, fenceSHA := scriptSHA(t, "scripts/acquire.lua"), scriptSHA(t, "scripts/fence.lua")
	servers := redistest.StartT(t, 3, redistest.Options{})
	direct := redistest.ClientsT(t, servers)
	for _, c := range direct[:2] {
		// A counter that exists, far below the clock: a grant starts it
		// again from the clock (one that is gone starts from the exact
		// clock, on which nodes never agree).
		if err := c.Set(t.Context(), "redlock:fence:k", 5, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := direct[2].Set(t.Context(), "k", "other\x001\x00", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	wires, clients := newWires(t, servers)
	for _, w := range wires {
		w.mark = fenceSHA
	}
	l, err := redlock.New(clients, redlock.WithFencing(), redlock.WithNodeTimeout(5*time.Second), redlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// window is the servers' clock (one machine's) in µs: the start of its
	// current 100 ms window and how far into it.
	window := func() (start, into int64) {
		now, err := direct[0].Time(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		us := now.UnixMicro()
		return us - us%100_000, us % 100_000
	}
	for range rounds {
		// Begin 50-70 ms into a window: node 0 grants in it.
		if !poll(t, 5*time.Second, func() bool { _, into := window(); return into >= 50_000 && into < 70_000 }) {
			t.Fatal("the servers' clock never showed 50-70 ms into a window")
		}
		began, _ := window()
		free := wires[1].stallOn(acquireSHA)
		got := obtainAsync(t.Context(), l, "k")
		if !poll(t, 5*time.Second, func() bool { return wires[1].heldUp() > 0 }) {
			t.Fatal("node 1's acquisition never came")
		}
		// Node 1 grants in the next window.
		if !poll(t, 5*time.Second, func() bool { start, into := window(); return start > began && into >= 2_000 }) {
			t.Fatal("the servers' clock never reached the next window")
		}
		free()
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		lock := r.lock
		for i, c := range direct[:2] {
			n, err := c.Get(t.Context(), "redlock:fence:k").Uint64()
			if err != nil {
				t.Fatal(err)
			}
			if n != lock.Fence() {
				t.Errorf("node %d's counter %d, want the fence %d", i, n, lock.Fence())
			}
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		wires[1].mu.Lock()
		wires[1].stall, wires[1].held = nil, 0
		wires[1].mu.Unlock()
	}
	// Close waits for the write-backs still on their way.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// (Node 2, which refused, gets the fence in the background.)
	for i, w := range wires[:2] {
		w.mu.Lock()
		if w.marked > 0 {
			t.Errorf("granting node %d got %d fence write-backs in %d acquisitions, want none: the nodes disagreed", i, w.marked, rounds)
		}
		w.mu.Unlock()
	}
}
