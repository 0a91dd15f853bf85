package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// When the caller's deadline ends the wait while a majority of nodes is
// down, Obtain reports the outage (ErrNoQuorum), never contention, whatever
// it was doing when the deadline came: waiting for its retry timer or in
// the middle of a round. The deadlines are spread across the rounds and the
// waits between them.
func TestOutageIsNeverContention(t *testing.T) {
	faults := []struct {
		name  string
		apply func(*redistest.Server) error
	}{
		// Killed nodes refuse connections at once: rounds are short.
		{"killed", (*redistest.Server).Kill},
		// Stopped nodes keep their connections and answer nothing: each
		// round lasts the node timeout.
		{"stopped", (*redistest.Server).Pause},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			c := newCluster(t, 3)
			for _, s := range c.servers[1:] {
				if err := f.apply(s); err != nil {
					t.Fatal(err)
				}
			}
			const nodeTimeout = 100 * time.Millisecond
			l := c.locker(t, redlock.WithNodeTimeout(nodeTimeout),
				redlock.WithRetry(redlock.LinearBackoff(20*time.Millisecond)))
			const runs = 30
			wrong := 0
			for i := range runs {
				// From a deadline inside the first round to one several
				// rounds and waits later, in steps that do not divide a
				// round's length.
				wait := time.Duration(i+1) * 13 * time.Millisecond
				ctx, cancel := context.WithTimeout(t.Context(), wait)
				lock, err := l.Obtain(ctx, "outage")
				cancel()
				if lock != nil {
					t.Fatalf("run %d (deadline %v): obtained a lock with two of three nodes down", i, wait)
				}
				var qe *redlock.QuorumError
				switch {
				case !errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, redlock.ErrNotObtained):
					t.Errorf("run %d (deadline %v): %v; want ErrNoQuorum, not ErrNotObtained", i, wait, err)
					wrong++
				case !errors.Is(err, context.DeadlineExceeded):
					t.Errorf("run %d (deadline %v): %v; want the deadline joined", i, wait, err)
					wrong++
				case !errors.As(err, &qe) || len(qe.Nodes) != 3:
					t.Errorf("run %d (deadline %v): %v; want the last round's detail for each of the 3 nodes", i, wait, err)
					wrong++
				}
			}
			if wrong > 0 {
				t.Fatalf("%d of %d runs reported the outage wrongly", wrong, runs)
			}
		})
	}
}

// A goroutine that waits in its Locker's line behind another that contends
// for the key, and whose deadline ends there without a round of its own,
// reports what the line's last round found: during an outage, ErrNoQuorum,
// with that round's detail, not contention.
func TestOutageWhileWaitingInLine(t *testing.T) {
	c := newCluster(t, 3)
	other := c.locker(t)
	held := mustObtain(t, other, "line")
	defer func() { _ = held.Release(context.Background()) }()
	l := c.locker(t, redlock.WithNodeTimeout(100*time.Millisecond),
		redlock.WithRetry(redlock.LinearBackoff(20*time.Millisecond)))
	// The head of the line waits for the holder, then for the nodes.
	headCtx, stopHead := context.WithCancel(t.Context())
	defer stopHead()
	head := obtainAsync(headCtx, l, "line")
	awaitLine(t, l, "line", 1)
	for _, s := range c.servers[1:] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := l.Obtain(ctx, "line")
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, redlock.ErrNotObtained) ||
		!errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &qe) || len(qe.Nodes) != 3 {
		t.Fatalf("Obtain that waited in line during an outage: %v; want ErrNoQuorum with the line's last round, and the deadline", err)
	}
	stopHead()
	if r := <-head; r.lock != nil {
		t.Fatal("the head of the line got a lock with two of three nodes down")
	}
}
