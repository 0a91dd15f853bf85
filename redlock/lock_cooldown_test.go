package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// A cooldown longer than the guard's maximum TTL would not survive a node
// restart: it is refused, and the lock stays held.
func TestReleaseAfterAboveRestartGuard(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithRestartGuard(4*time.Second), redlock.WithTTL(2*time.Second))
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	lock := mustObtain(t, l, "k")
	err := lock.ReleaseAfter(t.Context(), 5*time.Second)
	if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "restart guard") {
		t.Fatalf("cooldown above the guard: %v, want ErrInvalid", err)
	}
	// Inspect waits for every node, behind the acquisition's last call.
	if _, err := l.Inspect(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	if n := c.holders(t, "k", lock.Token()); n != 3 {
		t.Fatalf("after the refused cooldown the lock is on %d nodes, want 3", n)
	}
	if err := lock.ReleaseAfter(t.Context(), 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("during the cooldown: %v, want ErrNotObtained", err)
	}
}
