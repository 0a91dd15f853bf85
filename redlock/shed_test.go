package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// An attempt that has failed leaves its calls that are still queued for a
// node unsent, and their undo too: under deep queues (a thousand callers on
// a few connections) a call waits longer than the node timeout, its
// attempt fails, and sending it anyway only to undo it made every later
// call wait longer still, until nearly every attempt failed.
//
// Here node 1's and node 2's queue for the key is held up by A's
// acquisition, stalled on its way; B's acquisition of the same key waits
// behind it there and fails at its short node timeout (node 0 refuses it:
// A holds the key there). Once the stall ends, node 1 must get A's
// acquisition and not B's, and node 2 no undo of B's.
func TestFailedAttemptLeavesItsQueuedCallsUnsent(t *testing.T) {
	acquireSHA, releaseSHA := scriptSHA(t, "scripts/acquire.lua"), scriptSHA(t, "scripts/release.lua")
	servers := redistest.StartT(t, 3, redistest.Options{})
	wires := make([]*wire, len(servers))
	clients := make([]*redis.Client, len(servers))
	for i, s := range servers {
		wires[i] = newWire(t, s)
		clients[i] = wires[i].Client
	}
	wires[1].mark, wires[2].mark = acquireSHA, releaseSHA
	l, err := redlock.New(clients, redlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Open every connection first: a stall must hold a call, not a dial.
	if err := mustObtain(t, l, "k").Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, w := range wires[1:] {
		w.mu.Lock()
		w.marked = 0
		w.mu.Unlock()
	}
	free1, free2 := wires[1].stallOn(acquireSHA), wires[2].stallOn(acquireSHA)
	defer free1()
	defer free2()

	got := make(chan *redlock.Lock, 1)
	go func() {
		lock, err := l.TryObtain(t.Context(), "k", redlock.WithNodeTimeout(10*time.Second))
		if err != nil {
			t.Errorf("A: %v", err)
		}
		got <- lock
	}()
	for _, w := range wires[1:] {
		if !poll(t, 10*time.Second, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.held > 0 }) {
			t.Fatal("A's acquisition never reached the wire")
		}
	}
	if _, err := l.TryObtain(t.Context(), "k", redlock.WithNodeTimeout(100*time.Millisecond)); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("B: %v, want ErrNoQuorum (nodes 1 and 2 do not answer in time)", err)
	}
	free1()
	free2()
	a := <-got
	if a == nil {
		t.FailNow()
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Close waits for every call still queued.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]int{1: 1, 2: 1} {
		w := wires[i]
		w.mu.Lock()
		n := w.marked
		w.mu.Unlock()
		if n != want {
			what := map[int]string{1: "acquisitions", 2: "releases"}[i]
			t.Errorf("node %d got %d %s, want %d (A's): B's queued calls were sent after B had failed", i, n, what, want)
		}
	}
}
