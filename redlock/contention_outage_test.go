package redlock_test

import (
	"errors"
	"testing"

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
