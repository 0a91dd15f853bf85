package redlock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/redlock"
)

// Metadata is bounded like keys and tokens: up to MaxMetadataLen bytes is
// stored, more fails with ErrInvalid before any node is asked, on New and
// per call.
func TestMetadataBound(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	ok := strings.Repeat("m", redlock.MaxMetadataLen)
	lock := mustObtain(t, l, "k", redlock.WithMetadata(ok))
	if lock.Metadata() != ok {
		t.Fatal("metadata changed")
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The release returns at a majority; the last node's is on its way.
	if !c.emptied(t, "k") {
		t.Fatalf("the release left %q", c.values(t, "k"))
	}
	big := strings.Repeat("m", 1<<20)
	if _, err := l.TryObtain(t.Context(), "k", redlock.WithMetadata(big)); !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("TryObtain with 1 MB of metadata: %v; want ErrInvalid", err)
	}
	if got := c.values(t, "k"); strings.Join(got, "") != "" {
		t.Fatalf("refused metadata reached the nodes: %d bytes", len(strings.Join(got, "")))
	}
	if _, err := redlock.New(c.clients, redlock.WithMetadata(ok+"m")); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("New with metadata over the bound: %v; want ErrInvalid", err)
	}
}
