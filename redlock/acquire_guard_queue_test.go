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
	// A slot round waits for every node's answer: node 0's calls must not
	// expire in its held queue while the test sets up.
	l := c.bootstrapped(t, redlock.WithObserver(nodeAnswers{ch: answers}), redlock.WithNodeTimeout(5*time.Second))
	// Node 0's queue of the semaphore's attempts is held while nodes 1
	// and 2 grant n of them.
	s := l.Semaphore("queued", n)
	letGo := sync.OnceFunc(redlock.HoldQueue(l, 0, redlock.ReservedPrefix+"sem:queued:size"))
	t.Cleanup(letGo)
	var wg sync.WaitGroup
	defer wg.Wait()
	for range n {
		wg.Go(func() {
			if _, err := s.TryObtain(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	if !poll(t, 10*time.Second, func() bool {
		keys := c.clients[2].Keys(t.Context(), redlock.ReservedPrefix+"sem:queued:[0-9]*").Val()
		return len(keys) == n
	}) {
		t.Fatal("nodes 1 and 2 did not grant every attempt")
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
