package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// scriptCall is in every script call's command line: a wire that loses the
// writes that contain it cuts the node off from the Locker.
var scriptCall = []byte("evalsha")

// A hold belongs to the handle that took it. Two Locks share a token: L1
// holds nodes 0 and 1 (node 2 was cut off from it), L2 holds nodes 0 and 2
// (node 1 was cut off from it), a re-entry on node 0. When the cuts heal and
// L1 lets go, node 2, which L1 never held, keeps L2's hold, and node 0
// keeps it too: L2 still holds a majority, and a third client cannot take
// the key beside it. Releasing, cooling down (ReleaseAfter) and extending
// L1 each change only what L1 holds. The same with one Locker for both
// Locks.
func TestHoldBelongsToItsHandle(t *testing.T) {
	for _, oneLocker := range []bool{false, true} {
		for _, op := range []string{"release", "cooldown", "extend"} {
			t.Run(fmt.Sprintf("%s/oneLocker=%v", op, oneLocker), func(t *testing.T) {
				c := newCluster(t, 3)
				wires := func() []*wire {
					return []*wire{newWire(t, c.servers[0]), newWire(t, c.servers[1]), newWire(t, c.servers[2])}
				}
				clients := func(ws []*wire) []*redis.Client {
					return []*redis.Client{ws[0].Client, ws[1].Client, ws[2].Client}
				}
				// A refused write ends its connection: the cut node fails
				// at once, and the timeout only bounds a slow machine.
				opts := []redlock.Option{redlock.WithNodeTimeout(2 * time.Second), redlock.WithTTL(time.Minute)}
				wa := wires()
				la := newLocker(t, clients(wa), opts...)
				wb, lb := wa, la
				if !oneLocker {
					wb = wires()
					lb = newLocker(t, clients(wb), opts...)
				}
				const key, token = "shared", "T"

				wa[2].setRefuse(scriptCall)
				l1 := mustObtain(t, la, key, redlock.WithToken(token))
				wa[2].awaitRefused(t)
				wb[1].setRefuse(scriptCall)
				// Node 2 may still be reconnecting: try until it answers (a
				// failed attempt is undone).
				l2, err := lb.Obtain(redistest.BoundedCtx(t), key, redlock.WithToken(token), redlock.WithRetry(redlock.LinearBackoff(20*time.Millisecond)))
				if err != nil {
					t.Fatal(err)
				}
				wb[1].awaitRefused(t)
				if c.value(t, 1, key) == "" || !strings.HasPrefix(c.value(t, 2, key), token+"\x00") {
					t.Fatalf("setup: values %q, want L1 on nodes 0 and 1, L2 on nodes 0 and 2", c.values(t, key))
				}
				ttl2, err := c.clients[2].PTTL(t.Context(), key).Result()
				if err != nil {
					t.Fatal(err)
				}

				switch op {
				case "release":
					if err := l1.Release(t.Context()); err != nil {
						t.Fatalf("L1's Release: %v", err)
					}
				case "cooldown":
					if err := l1.ReleaseAfter(t.Context(), 50*time.Millisecond); err != nil {
						t.Fatalf("L1's ReleaseAfter: %v", err)
					}
					// Node 1's key, L1's alone, cools down and expires.
					if !poll(t, 10*time.Second, func() bool { return c.value(t, 1, key) == "" }) {
						t.Fatalf("node 1's key outlived L1's cooldown: %q", c.values(t, key))
					}
				case "extend":
					if err := l1.Extend(t.Context(), time.Minute); err != nil {
						t.Fatalf("L1's Extend: %v", err)
					}
					got, err := c.clients[2].PTTL(t.Context(), key).Result()
					if err != nil {
						t.Fatal(err)
					}
					if got > ttl2 {
						t.Fatalf("L1's Extend lengthened node 2's key, which only L2 holds: PTTL %v, was %v", got, ttl2)
					}
					if err := l1.Release(t.Context()); err != nil {
						t.Fatalf("L1's Release: %v", err)
					}
				}
				for _, i := range []int{0, 2} {
					if v := c.value(t, i, key); !strings.HasPrefix(v, token+"\x00") {
						t.Fatalf("node %d lost L2's hold when L1 let go: values %q", i, c.values(t, key))
					}
				}
				if !l2.Valid() {
					t.Fatal("L2 not valid")
				}
				third := newLocker(t, c.clients, opts...)
				if lock, err := third.TryObtain(t.Context(), key); !errors.Is(err, redlock.ErrNotObtained) {
					if lock != nil {
						t.Errorf("a third client obtained %q while L2 (valid: %v) holds it: values %q", key, l2.Valid(), c.values(t, key))
						_ = lock.Release(t.Context())
					}
					t.Fatalf("third client's TryObtain: %v, want ErrNotObtained", err)
				}
				if _, err := l2.TTL(t.Context()); err != nil {
					t.Fatalf("L2's TTL: %v", err)
				}
				if err := l2.Release(t.Context()); err != nil {
					t.Fatalf("L2's Release: %v", err)
				}
				if !c.emptied(t, key) {
					t.Fatalf("keys left after both released: %q", c.values(t, key))
				}
			})
		}
	}
}

// A fence write-back that reaches a node late, behind its own lock's
// release and the next acquisition of the same token there, never lowers
// the counter: here node 2's counter is ahead of the others', L1's calls to
// node 2 are held up until L2 (same token, another process) has been
// granted there and written its fence back; then L1's acquisition, release
// and straggler write-back land on node 2.
func TestLateFenceWriteBackNeverLowersCounter(t *testing.T) {
	const key, counter, token = "late-fence", "redlock:fence:late-fence", "T"
	c := newCluster(t, 3)
	now, err := c.clients[0].Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := now.UnixMicro() + 1_000_000_000_000
	for i, cl := range c.clients {
		v := ahead
		if i == 2 {
			v += 1000
		}
		if err := cl.Set(t.Context(), counter, v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slow := gatedWire(t, c.servers[2])
	t.Cleanup(slow.open)
	a := newLocker(t, []*redis.Client{c.clients[0], c.clients[1], slow.Client}, redlock.WithFencing(), redlock.WithNodeTimeout(5*time.Second))
	b := newLocker(t, c.clients, redlock.WithFencing())

	l1 := mustObtain(t, a, key, redlock.WithToken(token)) // nodes 0 and 1; node 2 held up
	if err := l1.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l2 := mustObtain(t, b, key, redlock.WithToken(token))
	if l2.Fence() <= l1.Fence() {
		t.Fatalf("L2's fence %d, not above L1's %d", l2.Fence(), l1.Fence())
	}
	// L2 is on node 2, its counter at L2's fence at least.
	if !poll(t, 10*time.Second, func() bool {
		v, err := c.clients[2].Get(t.Context(), counter).Uint64()
		return err == nil && v >= l2.Fence() && strings.HasPrefix(c.value(t, 2, key), token+"\x00")
	}) {
		t.Fatalf("node 2 not at L2's fence: %q", c.values(t, key))
	}
	before, err := c.clients[2].Get(t.Context(), counter).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	slow.open() // L1's acquisition, release, then its write-back
	// Close waits for the straggler's write-back.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := c.clients[2].Get(t.Context(), counter).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	if after < before {
		t.Fatalf("node 2's counter went back from %d to %d (L1's fence %d, L2's %d)", before, after, l1.Fence(), l2.Fence())
	}
	if !strings.HasPrefix(c.value(t, 2, key), token+"\x00") {
		t.Fatalf("L1's late calls took L2's hold on node 2: %q", c.values(t, key))
	}
	if err := l2.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	next := mustObtain(t, b, key)
	if next.Fence() <= l2.Fence() {
		t.Fatalf("next holder's fence %d, not above L2's %d", next.Fence(), l2.Fence())
	}
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// While a Campaign writes its term back, Leader reports no term, or the
// leader's: never a count that the leader did not take. Node 1's counter is
// behind node 0's, so the granting majority (nodes 0 and 1) disagrees and
// the write-back to node 1 is held up; node 2 grants only after the
// decision, with a count of its own far above the leader's term.
func TestLeaderReportsOnlyTheLeadersTerm(t *testing.T) {
	const name, counter = "elected", "redlock:fence:elected"
	c := newCluster(t, 3)
	now, err := c.clients[0].Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := now.UnixMicro() + 1_000_000_000_000
	for i, v := range []int64{ahead + 500, ahead, ahead + 1000} {
		if err := c.clients[i].Set(t.Context(), counter, v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	term := uint64(ahead + 501)
	fenceCall := []byte(redlock.ScriptSHA("fence.lua"))
	w1 := newWire(t, c.servers[1])
	late := gatedWire(t, c.servers[2])
	a := newLocker(t, []*redis.Client{c.clients[0], w1.Client, late.Client}, redlock.WithNodeTimeout(3*time.Second))
	// Registered after the Locker's Close, so they run before it.
	free1, free2 := w1.stallOn(fenceCall), late.stallOn(fenceCall)
	t.Cleanup(free1)
	t.Cleanup(free2)
	t.Cleanup(late.open)
	watcher := c.locker(t)

	type won struct {
		ld  *redlock.Leadership
		err error
	}
	done := make(chan won, 1)
	go func() {
		ld, err := a.Campaign(context.Background(), name, redlock.WithTTL(30*time.Second))
		done <- won{ld, err}
	}()
	// Node 0 has the leader's hold; node 2 grants now, after the decision.
	if !poll(t, 10*time.Second, func() bool { return c.value(t, 0, name) != "" }) {
		t.Fatal("the campaign reached no node")
	}
	// The campaign decided on nodes 0 and 1 once it writes its fence
	// back (held up on node 1); only then may node 2 answer.
	if !poll(t, 10*time.Second, func() bool { return w1.heldUp() > 0 }) {
		t.Fatal("the campaign wrote no fence back to node 1")
	}
	late.open()
	if !poll(t, 10*time.Second, func() bool { return c.value(t, 2, name) != "" }) {
		t.Fatal("node 2 did not grant")
	}
	seen := uint64(0)
	for range 20 {
		info, err := watcher.Leader(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Leading && info.Term != 0 && info.Term != term {
			t.Fatalf("Leader reported term %d while the campaign wrote back %d (counters %v)", info.Term, term, c.values(t, counter))
		}
		seen = max(seen, info.Term)
	}
	free1()
	free2()
	w := <-done
	if w.err != nil {
		t.Fatal(w.err)
	}
	defer func() {
		if err := w.ld.Resign(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if w.ld.Term() != term {
		t.Fatalf("leader's term %d, want %d", w.ld.Term(), term)
	}
	info, err := watcher.Leader(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Leading || info.Term != term {
		t.Fatalf("Leader after the campaign: %+v, want term %d", info, term)
	}
	t.Logf("terms seen during the write-back: up to %d", seen)
}

// KeepAlive's warning follows Until when an Extend moves it earlier: with
// every extension cut off after a short Extend, the work is told before the
// short Until, not at the long one.
func TestKeepAliveWarningFollowsShorterExtend(t *testing.T) {
	c := newCluster(t, 3)
	ws := []*wire{newWire(t, c.servers[0]), newWire(t, c.servers[1]), newWire(t, c.servers[2])}
	l := newLocker(t, []*redis.Client{ws[0].Client, ws[1].Client, ws[2].Client}, redlock.WithNodeTimeout(50*time.Millisecond))
	lock := mustObtain(t, l, "short", redlock.WithTTL(20*time.Second))
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	if err := lock.Extend(t.Context(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	until := lock.Until()
	for _, w := range ws {
		w.setLose(scriptCall)
	}
	select {
	case <-held.Done():
	case <-time.After(15 * time.Second):
		t.Fatalf("KeepAlive's context still live 15s later; Until was %v", until)
	}
	if now := time.Now(); !now.Before(until) {
		t.Fatalf("KeepAlive's context ended %v after Until", now.Sub(until))
	}
	if !errors.Is(context.Cause(held), redlock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", context.Cause(held))
	}
	for _, w := range ws {
		w.setLose(nil)
	}
	if lock.Valid() {
		t.Fatal("Valid after the loss")
	}
}

// Release ends every KeepAlive of the lock, however many there are.
func TestReleaseEndsEveryKeepAlive(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "kept-twice")
	var helds []context.Context
	for range 3 {
		held, stop := lock.KeepAlive(t.Context())
		defer stop()
		helds = append(helds, held)
	}
	// An Extend moves every keeper's times while they are all kept.
	if err := lock.Extend(t.Context(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, held := range helds {
		if held.Err() == nil {
			t.Fatalf("KeepAlive %d's context live after Release", i)
		}
		if !errors.Is(context.Cause(held), redlock.ErrReleased) {
			t.Fatalf("KeepAlive %d's cause %v, want ErrReleased", i, context.Cause(held))
		}
	}
}
