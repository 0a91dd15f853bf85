package redlock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Guarded acquisitions queued together for a node go to it as one call of
// the library's batch function, with one guard check for all: after a
// flush, every acquisition of the batch abstains there, and none is
// granted. (A batch on a server that lost the library goes again call by
// call as scripts: see conn's TestBatchOfGuardedAcquisitions.)
func TestGuardBatchAbstainsTogether(t *testing.T) {
	const n = 4
	c := newCluster(t, 3)
	answers := make(chan redlock.NodeEvent, 100)
	l := c.locker(t, append(guardOpts, redlock.WithObserver(nodeAnswers{ch: answers}))...)
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Node 0's queue of the semaphore's attempts is held while nodes 1
	// and 2 grant n of them.
	s := l.Semaphore("batch", n)
	letGo := sync.OnceFunc(redlock.HoldQueue(l, 0, redlock.ReservedPrefix+"sem:batch:size"))
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
	if err := c.clients[0].ConfigResetStat(t.Context()).Err(); err != nil {
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
	if keys := c.clients[0].Keys(t.Context(), redlock.ReservedPrefix+"sem:batch:*").Val(); len(keys) > 0 {
		t.Fatalf("node 0 holds %q after a batch that its guard refused", keys)
	}
	// (The first call out of the held queue may go alone.)
	if calls, _, _ := cmdStat(t, c.clients[0], "fcall"); calls >= n {
		t.Fatalf("node 0 got %v FCALLs for %d acquisitions queued together, want them batched", calls, n)
	}
}
