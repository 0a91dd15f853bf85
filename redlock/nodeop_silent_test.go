package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// Once a node has answered nothing for a node timeout (paused, cut off),
// an attempt does not wait for it again: a round that the others already
// lost is decided at once, and nothing is undone on the silent node, where
// nothing was sent. When the node answers again it votes again.
func TestSilentNodeDelaysNoAttempt(t *testing.T) {
	const timeout = 500 * time.Millisecond
	c := newCluster(t, 3)
	answers := make(chan redlock.NodeEvent, 100)
	l := c.locker(t, redlock.WithNodeTimeout(timeout), redlock.WithRetry(redlock.NoRetry()), redlock.WithObserver(nodeAnswers{ch: answers}))
	key := "silent"
	// Every node's queue for the key has its connection.
	lock, err := l.TryObtain(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Another holds the key on node 1: node 0's grant alone is no majority.
	// So it does another key, for after the pause: an acquisition of the
	// first key that node 2 took while paused may hold it there until it
	// expires (its connection was dropped, its reply never read).
	after := key + "-after"
	for _, k := range []string{key, after} {
		if err := c.clients[1].Set(t.Context(), k, "another", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.servers[2].Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.servers[2].Resume() })

	// The first attempt meets node 2's silence and waits out its timeout.
	start := time.Now()
	if _, err := l.TryObtain(t.Context(), key); err == nil {
		t.Fatal("TryObtain with node 1 held by another and node 2 paused: got the lock")
	}
	if d := time.Since(start); d < timeout {
		t.Fatalf("the first attempt took %v, less than the node timeout %v: node 2 did not hold it up, the test proves nothing", d.Round(time.Millisecond), timeout)
	}
	// The next one knows node 2 is silent.
	for len(answers) > 0 {
		<-answers
	}
	start = time.Now()
	_, err = l.TryObtain(t.Context(), key)
	t.Logf("the attempt after node 2 was silent for a node timeout took %v", time.Since(start).Round(time.Millisecond))
	if !errors.Is(err, redlock.ErrNoQuorum) {
		t.Errorf("TryObtain: %v, want ErrNoQuorum", err)
	}
	// The Observer hears of node 2 as of a node that failed, and the call
	// was not sent: the attempt did not wait for node 2. (What happened,
	// not how long it took: a busy machine stretches any attempt.)
	if e := awaitAnswer(t, answers, 2, redlock.OutcomeError); e.Err == nil {
		t.Errorf("node 2's event: outcome %v with no error", e.Outcome)
	} else if !errors.Is(e.Err, conn.ErrSilent) {
		t.Errorf("node 2's answer: %v, want the call not sent to a node known silent (it waited for node 2)", e.Err)
	}

	// Node 2 answers again: with node 1 still held, a lock needs its vote.
	if err := c.servers[2].Resume(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		lock, err := l.TryObtain(t.Context(), after)
		if err == nil {
			if err := lock.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2 did not vote again within 10s of resuming: %v", err)
		}
	}
}
