package redlock_test

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
	proto "github.com/quorumlock/redlock/redlock/internal/wire"
)

// The semaphore's size key lives exactly as long as its slots, in every
// path that keeps a slot: a cooldown keeps it too, so that a user of
// another size is refused (ErrInvalid) while the real size's users are
// told the permit is busy; and once no slot lives it is gone.
func TestSemaphoreSizeKeyFollowsSlots(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithNodeTimeout(250*time.Millisecond))
	const ttl, cooldown = 600 * time.Millisecond, 5 * time.Second
	sem := l.Semaphore("cool", 1)
	lock := mustPermit(t, sem, redlock.WithTTL(ttl))
	start := time.Now()
	if err := lock.ReleaseAfter(t.Context(), cooldown); err != nil {
		t.Fatal(err)
	}
	c.sizeOutlivesSlots(t, "cool", 1)
	// Past the permit's TTL, inside the cooldown.
	if !poll(t, 10*time.Second, func() bool { return time.Since(start) > 2*ttl }) {
		t.Fatal("unreachable")
	}
	if _, err := l.Semaphore("cool", 2).TryObtain(t.Context()); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("size 2 during size 1's cooldown: %v; want ErrInvalid", err)
	}
	if _, err := sem.TryObtain(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("size 1 during its cooldown: %v; want ErrNotObtained", err)
	}
	if time.Since(start) > cooldown {
		t.Fatal("the cooldown ended before the checks (slow machine?): the test shows nothing")
	}

	// A release without a cooldown takes the size key with the last slot:
	// the semaphore may be used with another size at once.
	other := mustPermit(t, l.Semaphore("resized", 2))
	if err := other.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !c.emptied(t, proto.SemSize("resized")) {
		t.Fatalf("the size key outlived the last permit: %q", c.values(t, proto.SemSize("resized")))
	}
	mustPermit(t, l.Semaphore("resized", 3))
}

// sizeOutlivesSlots fails the test unless, on every node, the size key of
// semaphore name of size lives at least as long as each of its slots.
func (c *cluster) sizeOutlivesSlots(t *testing.T, name string, size int) {
	t.Helper()
	for i := range c.clients {
		ttls := c.pttlsAtOnce(t, i, append([]string{proto.SemSize(name)}, slotKeys(name, size)...)...)
		for j, slotTTL := range ttls[1:] {
			if slotTTL > 0 && ttls[0] < slotTTL {
				t.Fatalf("node %d: size key lives %v, slot %d %v", i, ttls[0], j, slotTTL)
			}
		}
	}
}

// slotKeys are the slot keys of semaphore name of size.
func slotKeys(name string, size int) []string {
	keys := make([]string, size)
	for j := range keys {
		keys[j] = proto.SemSlot(name, j)
	}
	return keys
}

// pttlsAtOnce reads the PTTLs of keys on node i in one atomic step (MULTI), so
// that a call landing on the node meanwhile (a release that returned at a
// majority is still on its way to the others) cannot fall between them.
func (c *cluster) pttlsAtOnce(t *testing.T, i int, keys ...string) []time.Duration {
	t.Helper()
	cmds := make([]*redis.DurationCmd, len(keys))
	if _, err := c.clients[i].TxPipelined(t.Context(), func(p redis.Pipeliner) error {
		for j, k := range keys {
			cmds[j] = p.PTTL(t.Context(), k)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	out := make([]time.Duration, len(keys))
	for j, cmd := range cmds {
		out[j] = cmd.Val()
	}
	return out
}

// A failed attempt of a user of the wrong size leaves no size key behind:
// it cannot lock correct users out for longer than its own attempt.
func TestSemaphoreWrongSizeLeavesNothing(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	// Nodes 0 and 1 have every slot of size 5 held by another owner
	// (with no size key): only node 2 grants the wrong-size user.
	c.occupy(t, "pool", 0, 0, 1, 2, 3, 4)
	c.occupy(t, "pool", 1, 0, 1, 2, 3, 4)
	// A minute's TTL: a size key left behind would outlive the wait below.
	if _, err := l.Semaphore("pool", 5).TryObtain(t.Context(), redlock.WithTTL(time.Minute)); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("size 5 with two nodes full: %v; want ErrNotObtained", err)
	}
	// The attempt failed at the second refusal; node 2's grant is undone
	// when its reply arrives, which may be later.
	if !poll(t, 10*time.Second, func() bool {
		return c.value(t, 2, proto.SemSize("pool")) == "" && !c.slotsHeld(t, "pool", 5, 2)
	}) {
		t.Fatalf("the failed size-5 attempt left its size key or its permit on node 2: %q", c.values(t, proto.SemSize("pool")))
	}
	for i := range c.clients {
		for j := range 5 {
			if err := c.clients[i].Del(t.Context(), proto.SemSlot("pool", j)).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustPermit(t, l.Semaphore("pool", 3))
}

// A node that says the semaphore has another size fails the attempt
// whatever the order of the replies: here the other nodes grant first,
// and the refusal comes from a node whose queue is held until then.
func TestSemaphoreLateSizeReplyCounts(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	// Node 2 alone has permits of size 2.
	if err := c.clients[2].Set(t.Context(), proto.SemSize("late"), "2", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.clients[2].Set(t.Context(), proto.SemSlot("late", 0), foreign, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	letGo := sync.OnceFunc(redlock.HoldQueue(l, 2, proto.SemSize("late")))
	defer letGo()
	type result struct {
		lock *redlock.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		lock, err := l.Semaphore("late", 3).TryObtain(t.Context())
		done <- result{lock, err}
	}()
	// Nodes 0 and 1 grant: a majority for one slot, before node 2 says a
	// word.
	if !poll(t, 10*time.Second, func() bool { return c.slotsHeld(t, "late", 3, 0) && c.slotsHeld(t, "late", 3, 1) }) {
		t.Fatal("nodes 0 and 1 did not grant")
	}
	letGo()
	r := <-done
	if r.lock != nil {
		t.Fatalf("a majority granted before the node with another size answered, and %s was held", r.lock.Key())
	}
	if !errors.Is(r.err, redlock.ErrInvalid) {
		t.Fatalf("a majority granted before the node with another size answered: %v; want ErrInvalid", r.err)
	}
	for j := 1; j < 3; j++ { // slot 0 is the foreign permit's on node 2
		if !c.emptied(t, proto.SemSlot("late", j)) {
			t.Fatalf("slot %d left behind: %q", j, c.values(t, proto.SemSlot("late", j)))
		}
	}
}

// slotsHeld reports whether node i holds any slot of semaphore name of
// size for an owner other than the foreign one.
func (c *cluster) slotsHeld(t *testing.T, name string, size, i int) bool {
	t.Helper()
	for j := range size {
		if v := c.value(t, i, proto.SemSlot(name, j)); v != "" && v != foreign {
			return true
		}
	}
	return false
}

// With the restart guard, a node that lost the size key with its memory
// abstains: a user of another size is refused while a permit of the first
// size is valid, whatever the order of the answers.
func TestSemaphoreGuardNeverLarger(t *testing.T) {
	c := newCluster(t, 3)
	a, b := c.bootstrapped(t), c.bootstrapped(t)
	c.occupy(t, "guarded", 2, 0)
	lock := mustPermit(t, a.Semaphore("guarded", 1))
	if err := c.clients[2].Del(t.Context(), proto.SemSlot("guarded", 0)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.servers[1].Restart(); err != nil { // empty: no persistence
		t.Fatal(err)
	}
	got, err := b.Semaphore("guarded", 2).TryObtain(t.Context())
	if err == nil {
		t.Fatalf("size 2 took %s beside size 1's permit", got.Key())
	}
	if !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("size 2 beside a valid size-1 permit: %v; want ErrInvalid", err)
	}
	if !lock.Valid() {
		t.Fatal("the permit expired before the second user tried (slow machine?): the test shows nothing")
	}
}

// Every path that lengthens a permit or a reader's lease lengthens the
// state it needs with it: the size key of a permit, the index of leases of
// a lease, under lock-delay, Extend and a cooldown.
func TestStateOutlivesHoldsInEveryPath(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	delay := redlock.WithLockDelay(20 * time.Second)
	permit := mustPermit(t, l.Semaphore("paths", 1), delay)
	c.sizeOutlivesSlots(t, "paths", 1)
	if err := permit.Extend(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c.sizeOutlivesSlots(t, "paths", 1)
	if err := permit.ReleaseAfter(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	c.sizeOutlivesSlots(t, "paths", 1)

	lease := mustTake(t, "TryRLock", l.RWMutex("paths").TryRLock, delay)
	c.indexOutlivesLease(t, lease.Key())
	if err := lease.Extend(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c.indexOutlivesLease(t, lease.Key())
	if err := lease.ReleaseAfter(t.Context(), time.Minute); err != nil {
		t.Fatal(err)
	}
	c.indexOutlivesLease(t, lease.Key())
}

// indexOutlivesLease fails the test unless, on every node that has lease,
// its index of leases lists it and lives at least as long.
func (c *cluster) indexOutlivesLease(t *testing.T, lease string) {
	t.Helper()
	index := proto.IndexOfLease(lease)
	for i, cl := range c.clients {
		ttls := c.pttlsAtOnce(t, i, index, lease)
		if ttls[1] <= 0 {
			continue
		}
		listed, err := cl.SIsMember(t.Context(), index, lease).Result()
		if err != nil {
			t.Fatal(err)
		}
		if !listed || ttls[0] < ttls[1] {
			t.Fatalf("node %d: lease lives %v, its index %v (listing it: %v)", i, ttls[1], ttls[0], listed)
		}
	}
}

// A call with another size than the semaphore's in use is a *SizeError,
// the caller's mistake: the nodes that said so are not reported down.
func TestSemaphoreOtherSizeIsNoOutage(t *testing.T) {
	c := newCluster(t, 3)
	logs := newLogRecords()
	l := c.locker(t, redlock.WithLogger(slog.New(logs)))
	p := mustPermit(t, l.Semaphore("sized", 2))
	_, err := l.Semaphore("sized", 3).TryObtain(t.Context())
	var se *redlock.SizeError
	if !errors.As(err, &se) || se.Size != 2 || se.Want != 3 || !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("size 3 beside a permit of size 2: %v, want a SizeError (2, not 3)", err)
	}
	if n := logs.count("redlock: node down"); n != 0 {
		t.Errorf("%d warnings that a node is down after a call of the wrong size; want none", n)
	}
	if err := p.Release(t.Context()); err != nil {
		t.Error(err)
	}
}
