package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// semRetry retries fast: the tests are about who gets a permit, not when.
var semRetry = redlock.WithRetry(redlock.ExponentialBackoff(time.Millisecond, 20*time.Millisecond))

// Many goroutines on two Lockers take and give back permits: never more
// than size hold one at once, and every one gets its turns.
func TestSemaphoreNeverMoreThanSize(t *testing.T) {
	for _, size := range []int{1, 2, 8} {
		t.Run(fmt.Sprint("size", size), func(t *testing.T) {
			c := newCluster(t, 3)
			lockers := []*redlock.Locker{c.locker(t), c.locker(t)}
			workers, rounds := 2*size+6, 15
			var (
				holding, most atomic.Int32
				wg            sync.WaitGroup
				slots         sync.Map
			)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			for w := range workers {
				sem := lockers[w%2].Semaphore("pool", size)
				wg.Go(func() {
					for range rounds {
						lock, err := sem.Obtain(ctx, semRetry)
						if err != nil {
							t.Errorf("worker %d: %v", w, err)
							return
						}
						n := holding.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						if _, dup := slots.LoadOrStore(lock.Key(), w); dup {
							t.Errorf("slot %s held twice", lock.Key())
						}
						time.Sleep(2 * time.Millisecond) // the work
						slots.Delete(lock.Key())
						holding.Add(-1)
						if err := lock.Release(t.Context()); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if m := most.Load(); m > int32(size) || m < 1 {
				t.Fatalf("%d holders at once, size %d", m, size)
			}
			t.Logf("size %d: at most %d holders at once", size, most.Load())
		})
	}
}

// A full semaphore refuses with ErrNotObtained (contention, not outage);
// each permit is its own slot key.
func TestSemaphoreTryObtainFull(t *testing.T) {
	c := newCluster(t, 3)
	sem := c.locker(t).Semaphore("full", 2)
	a, err := sem.TryObtain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, err := sem.TryObtain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if a.Key() == b.Key() || !strings.HasPrefix(a.Key(), "redlock:sem:full:") {
		t.Fatalf("permits on %q and %q", a.Key(), b.Key())
	}
	_, err = sem.TryObtain(t.Context())
	if !errors.Is(err, redlock.ErrNotObtained) || errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("third TryObtain: %v; want ErrNotObtained", err)
	}
}

// A release wakes a waiter at once, long before its retry timer.
func TestSemaphoreReleaseWakesWaiter(t *testing.T) {
	c := newCluster(t, 3)
	// Another Locker holds it: only the nodes' announcement can wake us.
	held := mustPermit(t, c.locker(t).Semaphore("wake", 1))
	answers := make(chan redlock.NodeEvent, 100)
	l := c.locker(t, redlock.WithObserver(nodeAnswers{ch: answers}))
	got := make(chan error, 1)
	start := time.Now()
	go func() {
		lock, err := l.Semaphore("wake", 1).Obtain(redistest.BoundedCtx(t), redlock.WithRetry(redlock.LinearBackoff(time.Minute)))
		if err == nil {
			err = lock.Release(context.Background())
		}
		got <- err
	}()
	// The waiter found the semaphore full.
	refusedEverywhere(t, answers, 3)
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("waiter got the permit after %v", d)
	}
}

// A holder that never releases frees its slot at its TTL, and the
// semaphore's keys expire with it.
func TestSemaphoreHolderExpires(t *testing.T) {
	c := newCluster(t, 3)
	sem := c.locker(t, redlock.WithNodeTimeout(100*time.Millisecond)).Semaphore("dead", 1)
	const ttl = 500 * time.Millisecond
	dead := mustPermit(t, sem, redlock.WithTTL(ttl))
	start := time.Now()
	lock, err := sem.Obtain(redistest.BoundedCtx(t), semRetry)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < ttl/2 {
		t.Fatalf("obtained after %v, before the dead holder's TTL %v", d, ttl)
	}
	if lock.Key() != dead.Key() {
		t.Fatalf("size 1 gave slots %q and %q", dead.Key(), lock.Key())
	}
	// Where the permit is held (a majority; the last node may still hold
	// the dead permit's key for a moment), both keys expire.
	holding := 0
	for i, cl := range c.clients {
		if !strings.HasPrefix(c.value(t, i, lock.Key()), lock.Token()) {
			continue
		}
		holding++
		for _, key := range []string{lock.Key(), "redlock:sem:dead:size"} {
			if p := cl.PTTL(t.Context(), key).Val(); p <= 0 || p > 11*time.Second {
				t.Errorf("node %d: %s PTTL %v; want it to expire with the permit", i, key, p)
			}
		}
	}
	if holding < 2 {
		t.Fatalf("permit held on %d nodes", holding)
	}
}

// A second Release is ErrReleased and adds no permit.
func TestSemaphoreDoubleRelease(t *testing.T) {
	c := newCluster(t, 3)
	sem := c.locker(t).Semaphore("twice", 1)
	a := mustPermit(t, sem)
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(t.Context()); !errors.Is(err, redlock.ErrReleased) {
		t.Fatalf("second Release: %v; want ErrReleased", err)
	}
	mustPermit(t, sem)
	if _, err := sem.TryObtain(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryObtain after a double release: %v; want ErrNotObtained", err)
	}
}

// Users that disagree on the size get ErrInvalid, never a larger
// semaphore; bad names, sizes and options are ErrInvalid too.
func TestSemaphoreInvalid(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	mustPermit(t, l.Semaphore("sized", 2))
	for _, size := range []int{1, 3} {
		if _, err := l.Semaphore("sized", size).Obtain(redistest.BoundedCtx(t)); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("size %d over size 2: %v; want ErrInvalid", size, err)
		}
	}
	bad := []struct {
		name string
		size int
		opts []redlock.LockOption
	}{
		{"", 1, nil}, {"redlock:x", 1, nil}, {"s", 0, nil}, {"s", -1, nil},
		{"s", redlock.MaxSemaphoreSize + 1, nil}, {"s", 2, []redlock.LockOption{redlock.WithToken("t")}},
	}
	for _, b := range bad {
		if _, err := l.Semaphore(b.name, b.size).TryObtain(t.Context(), b.opts...); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Semaphore(%q, %d): %v; want ErrInvalid", b.name, b.size, err)
		}
	}
}

// A permit is a Lock: Extend lengthens the slot and the size key with it,
// TTL reads it, KeepAlive keeps it; its fence grows per slot.
func TestSemaphorePermitIsALock(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	sem := l.Semaphore("lock", 1)
	a := mustPermit(t, sem, redlock.WithFencing())
	if err := a.Extend(t.Context(), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl, err := a.TTL(t.Context()); err != nil || ttl < 15*time.Second {
		t.Fatalf("TTL after Extend: %v, %v", ttl, err)
	}
	for i, cl := range c.clients {
		if p := cl.PTTL(t.Context(), "redlock:sem:lock:size").Val(); p < 15*time.Second {
			t.Errorf("node %d: size key PTTL %v after Extend to 20s", i, p)
		}
	}
	held, stop := a.KeepAlive(t.Context())
	if held.Err() != nil {
		t.Fatal(context.Cause(held))
	}
	stop()
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := mustPermit(t, sem, redlock.WithFencing())
	if a.Fence() == 0 || b.Fence() <= a.Fence() || a.Key() != b.Key() {
		t.Fatalf("fences %d then %d on %q, %q", a.Fence(), b.Fence(), a.Key(), b.Key())
	}
}

// One node of three down: permits still come; two down: ErrNoQuorum.
func TestSemaphoreOutage(t *testing.T) {
	c := newCluster(t, 3)
	sem := c.locker(t, redlock.WithNodeTimeout(200*time.Millisecond)).Semaphore("outage", 2)
	if err := c.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	mustPermit(t, sem)
	mustPermit(t, sem)
	if _, err := sem.TryObtain(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("full with a node down: %v; want ErrNotObtained", err)
	}
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	_, err := c.locker(t).Semaphore("outage2", 2).TryObtain(t.Context())
	if !errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("two nodes down: %v; want ErrNoQuorum", err)
	}
}

// A single node runs the same code.
func TestSemaphoreSingleNode(t *testing.T) {
	c := newCluster(t, 1)
	sem := c.locker(t).Semaphore("one", 2)
	a, b := mustPermit(t, sem), mustPermit(t, sem)
	if _, err := sem.TryObtain(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("full: %v", err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustPermit(t, sem)
	if err := b.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// refusedEverywhere waits, up to 10s, for n answers among answers that
// a node holds the key for another owner, and fails the test if they do
// not come.
func refusedEverywhere(t *testing.T, answers <-chan redlock.NodeEvent, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for n > 0 {
		select {
		case e := <-answers:
			if e.Outcome == redlock.OutcomeHeldByOther {
				n--
			}
		case <-timeout:
			t.Fatalf("%d refusals still to come", n)
		}
	}
}

func mustPermit(t *testing.T, sem *redlock.Semaphore, opts ...redlock.LockOption) *redlock.Lock {
	t.Helper()
	return mustTake(t, "TryObtain", sem.TryObtain, opts...)
}

// Goroutines of one Locker that wait for permits each get one as permits
// come free: one's permit does not make the next wait for its release.
func TestSemaphoreOneLockerFillsPermits(t *testing.T) {
	c := newCluster(t, 3)
	answers := make(chan redlock.NodeEvent, 100)
	sem, other := c.locker(t, redlock.WithObserver(nodeAnswers{ch: answers})).Semaphore("fill", 2), c.locker(t).Semaphore("fill", 2)
	held := []*redlock.Lock{mustPermit(t, other), mustPermit(t, other)}
	got := make(chan *redlock.Lock, len(held))
	for range held {
		go func() {
			lock, err := sem.Obtain(redistest.BoundedCtx(t), redlock.WithRetry(redlock.LinearBackoff(time.Minute)))
			if err != nil {
				t.Error(err)
			}
			got <- lock
		}()
	}
	// Both found the semaphore full: each attempt refused by all three
	// nodes.
	refusedEverywhere(t, answers, 2*3)
	for i, p := range held {
		start := time.Now()
		if err := p.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The waiter that got the first permit still holds it.
		lock := <-got
		if lock == nil {
			t.FailNow()
		}
		defer lock.Release(context.Background())
		if d := time.Since(start); d > 7*time.Second {
			t.Fatalf("waiter %d had a permit %v after its release; the TTL is 10s", i, d)
		}
	}
}

// The restart guard applies to every slot: after two of three nodes were
// flushed, a semaphore of size 1 held on them is not handed out again
// while its permit is valid.
func TestSemaphoreRestartGuard(t *testing.T) {
	c := newCluster(t, 3)
	a, b := c.bootstrapped(t), c.locker(t, guardOpts...)
	lock := mustPermit(t, a.Semaphore("guarded", 1))
	for _, cl := range c.clients[:2] {
		if err := cl.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.Semaphore("guarded", 1).TryObtain(t.Context())
	secondClientKeptOut(t, lock, err, "two of three nodes were flushed")
}

// Lock-delay: a permit's slot lives its TTL plus the delay on the servers,
// and its size key as long.
func TestSemaphoreLockDelay(t *testing.T) {
	c := newCluster(t, 3)
	const ttl, delay = 2 * time.Second, 20 * time.Second
	lock := mustPermit(t, c.locker(t).Semaphore("delayed", 1), redlock.WithTTL(ttl), redlock.WithLockDelay(delay))
	if !poll(t, 10*time.Second, func() bool { return c.holders(t, lock.Key(), lock.Token()) == 3 }) {
		t.Fatalf("permit not on every node: %q", c.values(t, lock.Key()))
	}
	for i, cl := range c.clients {
		for _, key := range []string{lock.Key(), "redlock:sem:delayed:size"} {
			if p := cl.PTTL(t.Context(), key).Val(); p < delay {
				t.Errorf("node %d: %s PTTL %v; want at least the lock-delay %v", i, key, p, delay)
			}
		}
	}
}

// occupy makes node i hold the given slots of semaphore name for another
// owner, for a minute.
func (c *cluster) occupy(t *testing.T, name string, i int, slots ...int) {
	t.Helper()
	for _, s := range slots {
		key := fmt.Sprintf("redlock:sem:%s:%d", name, s)
		if err := c.clients[i].Set(t.Context(), key, "foreign\x001\x00", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Nodes in different states grant different slots: the attempt holds the
// slot a majority granted and undoes its grants of the other; with no
// majority for any slot it fails as contention and leaves nothing behind.
func TestSemaphoreSplitVotes(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	// Size 2: node 0 has only slot 1 free, node 1 only slot 0, node 2 both.
	c.occupy(t, "split2", 0, 0)
	c.occupy(t, "split2", 1, 1)
	lock := mustPermit(t, l.Semaphore("split2", 2))
	other := "redlock:sem:split2:0"
	if lock.Key() == other {
		other = "redlock:sem:split2:1"
	}
	if c.holders(t, lock.Key(), lock.Token()) < 2 {
		t.Fatalf("%s held on %q", lock.Key(), c.values(t, lock.Key()))
	}
	if !poll(t, 10*time.Second, func() bool { return c.holders(t, other, lock.Token()) == 0 }) {
		t.Fatalf("the grant of %s was not undone: %q", other, c.values(t, other))
	}

	// Size 3: each node has one free slot, a different one on each: no
	// slot has a majority, whatever the rotation.
	c.occupy(t, "split3", 0, 0, 1)
	c.occupy(t, "split3", 1, 1, 2)
	c.occupy(t, "split3", 2, 0, 2)
	_, err := l.Semaphore("split3", 3).TryObtain(t.Context())
	if !errors.Is(err, redlock.ErrNotObtained) || errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("split 1-1-1: %v; want ErrNotObtained", err)
	}
	free := map[int]string{0: "redlock:sem:split3:2", 1: "redlock:sem:split3:0", 2: "redlock:sem:split3:1"}
	if !poll(t, 10*time.Second, func() bool {
		for i, key := range free {
			if c.value(t, i, key) != "" {
				return false
			}
		}
		return true
	}) {
		t.Fatal("a failed split attempt left a grant behind")
	}
}

// KeepAlive keeps a permit, and its semaphore's size key, past the TTL:
// the Do-like use of a permit.
func TestSemaphoreKeepAlive(t *testing.T) {
	c := newCluster(t, 3)
	const ttl = time.Second
	sem := c.locker(t, redlock.WithNodeTimeout(100*time.Millisecond)).Semaphore("kept", 1)
	lock := mustPermit(t, sem, redlock.WithTTL(ttl))
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	time.Sleep(3 * ttl) // the time the permit would have expired in, thrice
	if err := context.Cause(held); err != nil || !lock.Valid() {
		t.Fatalf("permit lost under KeepAlive: %v", err)
	}
	if _, err := sem.TryObtain(t.Context()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryObtain while kept: %v; want ErrNotObtained", err)
	}
	kept := 0
	for _, cl := range c.clients {
		if cl.PTTL(t.Context(), "redlock:sem:kept:size").Val() > 0 {
			kept++
		}
	}
	if kept < 2 {
		t.Fatalf("size key alive on %d nodes after 3 TTLs of KeepAlive", kept)
	}
	stop()
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Permit takers on two Lockers while a random minority of the five nodes
// is paused and resumed: a semaphore of two never has three holders.
func TestSemaphoreUnderPauses(t *testing.T) {
	lockers, ctx, stop := underPauses(t)
	var (
		holding, most, taken atomic.Int32
		wg                   sync.WaitGroup
	)
	for w := range 6 {
		sem := lockers[w%2].Semaphore("paused", 2)
		wg.Go(func() {
			for ctx.Err() == nil {
				lock, err := sem.Obtain(ctx, semRetry)
				if err != nil {
					continue // an outage or the end: the pauses cause both
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				taken.Add(1)
				time.Sleep(time.Duration(1+w%3) * time.Millisecond)
				holding.Add(-1)
				// A failed release leaves the permit to its TTL: safe.
				_ = lock.Release(context.Background())
			}
		})
	}
	wg.Wait()
	stop()
	if m := most.Load(); m > 2 {
		t.Fatalf("%d holders of a semaphore of 2 at once", m)
	}
	if taken.Load() == 0 {
		t.Fatal("no permit was taken: the test tested nothing")
	}
	t.Logf("%d permits taken, at most %d at once", taken.Load(), most.Load())
}

// A waiter gets a permit soon after a release that reaches the nodes one
// at a time, each announcing it, while the queues of the slot keys are busy
// on every node. It used to sleep until the holder's expiry: each wake-up's
// attempt found the nodes that had released refusing it with the grant of
// its previous attempt, whose undo had not landed (it went on the slot key's
// busy queue, and the attempts on the size key's, so they overtook it; a
// straggler's undo is sent only when its reply comes). The 10 s wake-ups of
// TestSemaphoreOneLockerFillsPermits under load were this. Now the undos
// go on the attempts' queue, and an attempt that some node granted is
// retried within two node timeouts.
func TestSemaphoreReleaseNodeByNodeWakesWaiter(t *testing.T) {
	c := newCluster(t, 3)
	name := ""
	for i := 0; name == ""; i++ {
		// One whose slot key and size key go to different queues.
		n := fmt.Sprintf("bynode-%d", i)
		if !redlock.SameQueue(redlock.ReservedPrefix+"sem:"+n+":0", redlock.ReservedPrefix+"sem:"+n+":size") {
			name = n
		}
	}
	held := mustPermit(t, c.locker(t).Semaphore(name, 1))
	slot, channel := held.Key(), redlock.ReservedPrefix+"released:"+redlock.ReservedPrefix+"sem:"+name
	c.heldEverywhere(t, slot, held.Token())
	answers := make(chan redlock.NodeEvent, 100)
	l := c.locker(t, redlock.WithObserver(nodeAnswers{ch: answers}))
	got := semWaiter(t, c, l, name)
	for i := range c.clients {
		letGo := sync.OnceFunc(redlock.HoldQueue(l, i, slot))
		t.Cleanup(letGo)
		defer letGo()
	}
	var released time.Time
	for i, cl := range c.clients {
		// The release reaches node i, which announces it.
		if err := cl.Del(t.Context(), slot).Err(); err != nil {
			t.Fatal(err)
		}
		released = time.Now()
		if err := cl.Publish(t.Context(), channel, "").Err(); err != nil {
			t.Fatal(err)
		}
		// The waiter's attempt finds the slot free on node 0 alone, and
		// takes it there.
		if i == 0 {
			awaitAnswer(t, answers, 0, redlock.OutcomeOK)
		}
	}
	waiterGotSoon(t, got, released)
}

// waiterGotSoon fails the test unless the waiter's outcome, got, comes
// without error within 5s of released (the holder's TTL is 10s): a permit
// or a lock.
func waiterGotSoon(t *testing.T, got <-chan error, released time.Time) {
	t.Helper()
	select {
	case err := <-got:
		if d := time.Since(released); d > 5*time.Second || err != nil {
			t.Fatalf("the waiter got it %v after the last release (the TTL is 10s); error %v", d, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiter never got it")
	}
}

// A waiter whose attempt some node granted (a release on its way) tries
// again within two node timeouts, even if no announcement wakes it: they
// may all have come already, each waking an attempt that the nodes still
// to release refused. It used to sleep until the holder's expiry.
func TestSemaphoreSplitAttemptRetriesSoon(t *testing.T) {
	c := newCluster(t, 3)
	name := "split"
	size := redlock.ReservedPrefix + "sem:" + name + ":size"
	held := mustPermit(t, c.locker(t).Semaphore(name, 1))
	slot := held.Key()
	c.heldEverywhere(t, slot, held.Token())
	answers := make(chan redlock.NodeEvent, 100)
	l := c.locker(t, redlock.WithObserver(nodeAnswers{ch: answers}))
	got := semWaiter(t, c, l, name)
	for len(answers) > 0 {
		<-answers // the first attempts'
	}
	// Nodes 1 and 2 answer the next attempt late, so that node 0's grant
	// is most likely counted in its round. (The observer sees an answer
	// before the round counts it: node 0's may still come after the
	// refusals, a late grant, which must retry soon as well; see
	// TestLateGrantRetriesSoon.)
	var letGo []func()
	for i := 1; i < 3; i++ {
		f := sync.OnceFunc(redlock.HoldQueue(l, i, size))
		t.Cleanup(f)
		letGo = append(letGo, f)
	}
	// The release reaches node 0, which announces it.
	if err := c.clients[0].Del(t.Context(), slot).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.clients[0].Publish(t.Context(), redlock.ReservedPrefix+"released:"+redlock.ReservedPrefix+"sem:"+name, "").Err(); err != nil {
		t.Fatal(err)
	}
	awaitAnswer(t, answers, 0, redlock.OutcomeOK)
	for _, f := range letGo {
		f()
	}
	// Node 1 refuses the attempt that node 0 granted.
	awaitAnswer(t, answers, 1, redlock.OutcomeHeldByOther)
	// Then node 1, whose announcement is lost.
	if err := c.clients[1].Del(t.Context(), slot).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// What the nodes answered since node 1's refusal.
		for t.Failed() && len(answers) > 0 {
			e := <-answers
			t.Logf("then node %d: %v after %v (%v)", e.Node, e.Outcome, e.Latency, e.Err)
		}
	})
	waiterGotSoon(t, got, time.Now())
}

// semWaiter starts a waiter for a permit of semaphore name of 1, on l,
// whose retry timer is a minute (only an announcement or a holder's expiry
// wakes it), and waits until it listens on every node. It returns the
// waiter's outcome.
func semWaiter(t *testing.T, c *cluster, l *redlock.Locker, name string) <-chan error {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		p, err := l.Semaphore(name, 1).Obtain(redistest.BoundedCtx(t), redlock.WithRetry(redlock.LinearBackoff(time.Minute)))
		if err == nil {
			err = p.Release(context.Background())
		}
		got <- err
	}()
	c.subscribedEverywhere(t, redlock.ReservedPrefix+"sem:"+name)
	return got
}
