package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

func TestInspect(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "i", redlock.WithMetadata("host=a"))
	if err := c.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	st, err := l.Inspect(t.Context(), "i")
	if err != nil {
		t.Fatal(err)
	}
	if st.Key != "i" || st.Holder != lock.Token() || len(st.Nodes) != 3 {
		t.Fatalf("Status = %+v", st)
	}
	for i, n := range st.Nodes[:2] {
		if n.Addr != c.servers[i].Addr || !n.Held || n.Token != lock.Token() || n.Metadata != "host=a" || n.Holds != 1 || n.TTL <= 0 || n.Err != nil {
			t.Fatalf("node %d = %+v", i, n)
		}
	}
	if n := st.Nodes[2]; n.Err == nil || n.Held {
		t.Fatalf("dead node = %+v, want its error", n)
	}
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Inspect(t.Context(), "i"); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Inspect with a majority down: %v", err)
	}
	if _, err := l.Inspect(t.Context(), ""); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("empty key: %v", err)
	}
}

func TestForceRelease(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	stuck := mustObtain(t, l, "s")
	if err := l.ForceRelease(t.Context(), "s"); err != nil {
		t.Fatal(err)
	}
	if n := c.holders(t, "s", stuck.Token()); n != 0 {
		t.Fatalf("key on %d nodes after ForceRelease", n)
	}
	if err := stuck.Extend(t.Context(), 5*time.Second); !errors.Is(err, redlock.ErrLockExpired) {
		t.Fatalf("owner's Extend after ForceRelease: %v", err)
	}
	for _, s := range c.servers[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.ForceRelease(t.Context(), "s"); !errors.Is(err, redlock.ErrNoQuorum) || !strings.Contains(err.Error(), "force-release") {
		t.Fatalf("ForceRelease with a majority down: %v", err)
	}
}

func TestBootstrapReportsUnreachableNodes(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithNodeTimeout(100*time.Millisecond))
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	err := l.Bootstrap(context.Background())
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNoQuorum) || !errors.As(err, &qe) || qe.Nodes[1].Outcome != redlock.OutcomeError {
		t.Fatalf("Bootstrap with a node down: %v", err)
	}
}

func TestInspectShowsFence(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithFencing())
	lock := mustObtain(t, l, "f")
	st, err := l.Inspect(t.Context(), "f")
	if err != nil {
		t.Fatal(err)
	}
	// The write-back is decided at a majority; the last node may still be
	// on its way.
	// (A node whose grant came after the decision incremented its counter
	// later, past the lock's fence: that only makes later fences larger.)
	with := 0
	for _, n := range st.Nodes {
		if n.Fence >= lock.Fence() {
			with++
		}
	}
	if with < l.Quorum() {
		t.Fatalf("%d nodes show at least the fence %d, want a majority: %+v", with, lock.Fence(), st.Nodes)
	}
}
