package redlock_test

import (
	"errors"
	"testing"
	"time"

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
	wires, clients := newWires(t, servers)
	wires[1].mark, wires[2].mark = acquireSHA, releaseSHA
	l, err := redlock.New(clients, redlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Open every connection first: a stall must hold a call, not a dial.
	warmUp(t, l, "k", wires[1:])
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
		if !poll(t, 10*time.Second, func() bool { return w.heldUp() > 0 }) {
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

// An acquisition that waited in its node's queue past the node timeout is
// not sent, whatever became of its attempt: its round counted the node as
// not answering already, and sending it would only make the calls queued
// behind it later still. Here node 1's queue is held up (a busy process)
// while the attempt wins on nodes 0 and 2.
func TestAcquisitionQueuedPastTheNodeTimeoutIsNotSent(t *testing.T) {
	const timeout = 300 * time.Millisecond
	acquireSHA := scriptSHA(t, "scripts/acquire.lua")
	servers := redistest.StartT(t, 3, redistest.Options{})
	wires, clients := newWires(t, servers)
	wires[1].mark = acquireSHA
	l, err := redlock.New(clients, redlock.WithTTL(30*time.Second), redlock.WithNodeTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	// Open every connection first.
	warmUp(t, l, "k", wires[1:2])

	letGo := redlock.HoldQueue(l, 1, "k")
	lock, err := l.TryObtain(t.Context(), "k")
	if err != nil {
		letGo()
		t.Fatal(err)
	}
	// What is awaited here is time itself: the call's age past the node
	// timeout.
	time.Sleep(2 * timeout)
	letGo()
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wires[1].mu.Lock()
	defer wires[1].mu.Unlock()
	if wires[1].marked != 0 {
		t.Errorf("node 1 got the acquisition that had waited %v in its queue (node timeout %v): want it not sent", 2*timeout, timeout)
	}
}

// warmUp opens l's connections for key (its queues') with an Obtain and
// Release of it and waits until each of marked has counted its script (each wire's mark)
// once, before it counts from zero again: under load a node's share of a
// round may go out after the round was decided.
func warmUp(t *testing.T, l *redlock.Locker, key string, marked []*wire) {
	t.Helper()
	lock := mustObtain(t, l, key, redlock.WithNodeTimeout(5*time.Second))
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, w := range marked {
		if !poll(t, 10*time.Second, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.marked == 1 }) {
			t.Fatal("the warm-up's calls never reached a node")
		}
		w.mu.Lock()
		w.marked = 0
		w.mu.Unlock()
	}
}
