package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// With one node of three dead and the key held by another owner on the two
// live ones, an attempt is lost to contention: the refusal of the second
// live node counts, even when the dead node's failure and the first
// refusal arrive before it. Every run must say ErrNotObtained.
func TestContentionWithANodeDown(t *testing.T) {
	c := newCluster(t, 3)
	if err := c.servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	holder := c.locker(t)
	mustObtain(t, holder, "busy")
	contender := c.locker(t)
	const runs = 100
	wrong := 0
	for i := range runs {
		lock, err := contender.TryObtain(t.Context(), "busy")
		if lock != nil {
			t.Fatalf("run %d: obtained a lock held by another", i)
		}
		if !errors.Is(err, redlock.ErrNotObtained) || errors.Is(err, redlock.ErrNoQuorum) {
			wrong++
			if wrong <= 3 {
				t.Errorf("run %d: %v; want ErrNotObtained", i, err)
			}
		}
	}
	if wrong > 0 {
		t.Fatalf("%d of %d runs did not report contention", wrong, runs)
	}
}

// A waiter whose attempt a holder refused waits for that holder as for
// contention, even when a node down makes the round an outage
// (ErrNoQuorum): here the holder's majority counts a node that has died
// since, and the key is gone from the other live node, so the waiter gets
// one grant, one refusal and one failure. It must get the lock soon after
// the holder lets go, not after its retry strategy's next delay (a minute).
func TestWaiterWithANodeDownWaitsForTheHolder(t *testing.T) {
	c := newCluster(t, 3)
	held := mustObtain(t, c.locker(t), "k")
	// Its grant on node 1 may come after the majority: wait for it, so
	// that it is gone once deleted.
	c.heldEverywhere(t, "k", held.Token())
	if err := c.clients[1].Del(t.Context(), "k").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	answers := make(chan redlock.NodeEvent, 100)
	got := waiter(t, c.locker(t, redlock.WithObserver(nodeAnswers{ch: answers})), "k")
	awaitAnswer(t, answers, 0, redlock.OutcomeHeldByOther)
	// Node 0 alone takes the release: the holder's round fails, the key
	// is free.
	if err := held.Release(t.Context()); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Release with the key on one node of three: %v, want ErrNoQuorum", err)
	}
	released := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the lock within 5s of the holder's release")
	}
	if d := time.Since(released); d > 5*time.Second {
		t.Fatalf("the waiter got the lock %v after the holder's release", d)
	}
}
