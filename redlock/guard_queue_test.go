package redlock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Guarded acquisitions queued together for a node reach it after a flush:
// each abstains there (the flush took the guard's passed key away with the
// marker), and none is granted.
func TestGuardQueuedAcquisitionsAbstainAfterFlush(t *testing.T) {
	const n = 4
	c := newCluster(t, 3)
	answers := make(chan redlock.NodeEvent, 100)
	l := c.bootstrapped(t, redlock.WithObserver(nodeAnswers{ch: answers}))
	// Node 0's queue of the semaphore's attempts is held while nodes 1
	// and 2 grant n of them.
	s := l.Semaphore("queued", n)
	letGo := sync.OnceFunc(redlock.HoldQueue(l, 0, redlock.ReservedPrefix+"sem:queued:size"))
	t.Cleanup(letGo)
	for range n {
		if _, err := s.TryObtain(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Node 0 forgets everything before they reach it.
	if err := c.clients[0].FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	letGo()
	for got := 0; got < n; {
		select {
		case e := <-answers:
			if e.Node != 0 {
				continue
			}
			if got++; !e.Abstained {
				t.Fatalf("node 0 answered %v (%v), want ABSTAIN", e.Outcome, e.Err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("node 0 answered %d of %d acquisitions", got, n)
		}
	}
	if keys := c.clients[0].Keys(t.Context(), redlock.ReservedPrefix+"sem:queued:*").Val(); len(keys) > 0 {
		t.Fatalf("node 0 holds %q after acquisitions that its guard refused", keys)
	}
}
