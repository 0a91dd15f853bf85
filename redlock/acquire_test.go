package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/redlock"
)

// A slow node must not delay the answer once a majority has decided it.
func TestSlowNodeDoesNotDelayDecision(t *testing.T) {
	c := newCluster(t, 3)
	slow := gatedWire(t, c.servers[2])
	clients := []*redis.Client{c.clients[0], c.clients[1], slow.Client}
	l := newLocker(t, clients, redlock.WithNodeTimeout(5*time.Second))
	t.Cleanup(slow.open) // before the locker's Close, even if the test fails
	done := make(chan error, 1)
	go func() {
		lock, err := l.TryObtain(context.Background(), "k")
		if err == nil {
			err = lock.Release(context.Background())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("obtain+release waited for the slow node")
	}
	slow.open()
}

// A node that grants after a failed round has been decided is cleaned up as
// its reply arrives: no key of ours is left anywhere.
func TestLateStragglerIsReleased(t *testing.T) {
	c := newCluster(t, 3)
	// The holder's key sits on nodes 0 and 1 only (a locker over those
	// two needs both), so the straggler on node 2 can grant.
	other := newLocker(t, c.clients[:2])
	held := mustObtain(t, other, "k")
	slow := gatedWire(t, c.servers[2])
	l := newLocker(t, []*redis.Client{c.clients[0], c.clients[1], slow.Client}, redlock.WithNodeTimeout(5*time.Second))
	t.Cleanup(slow.open) // before the locker's Close, even if the test fails

	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("got %v, want ErrNotObtained", err)
	}
	var qe *redlock.QuorumError
	if errors.As(err, &qe); qe == nil || qe.Nodes[2].Outcome != redlock.OutcomeNoReply {
		t.Fatalf("want node 2 without a reply at the decision: %v", err)
	}
	slow.open() // the straggler now sets its key, then the clean-up runs
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if v := c.value(t, 2, "k"); v != "" {
		t.Fatalf("node 2 keeps %q after the failed attempt's straggler", v)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// The validity check uses the injected clock: a round that seemingly took
// longer than the TTL grants nothing and leaves nothing behind.
func TestNoValidityNoLock(t *testing.T) {
	c := newCluster(t, 3)
	jump := &jumpClock{Fake: clock.NewFake(time.Now()), jump: 2 * time.Second}
	l := c.locker(t, redlock.WithClock(jump), redlock.WithTTL(time.Second), redlock.WithNodeTimeout(500*time.Millisecond))
	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("got %v, want ErrNoQuorum for a majority without validity", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, v := range c.values(t, "k") {
		if v != "" {
			t.Fatalf("node %d keeps %q", i, v)
		}
	}
}

// jumpClock reports that every round took jump.
type jumpClock struct {
	*clock.Fake
	jump time.Duration
}

func (j *jumpClock) Since(t time.Time) time.Duration { return j.Fake.Since(t) + j.jump }
