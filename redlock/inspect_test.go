package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Inspect of a semaphore shows each slot, its permits' holders among them.
func TestSemaphoreInspect(t *testing.T) {
	c := newCluster(t, 3)
	sem := c.locker(t).Semaphore("seen", 3)
	a, b := mustPermit(t, sem), mustPermit(t, sem)
	for _, p := range []*redlock.Lock{a, b} {
		c.heldEverywhere(t, p.Key(), p.Token())
	}
	slots, err := sem.Inspect(t.Context())
	if err != nil || len(slots) != 3 {
		t.Fatalf("Inspect: %d slots, %v; want 3, nil", len(slots), err)
	}
	holders := map[string]string{}
	for _, st := range slots {
		if st.Holder != "" {
			holders[st.Key] = st.Holder
		}
	}
	if len(holders) != 2 || holders[a.Key()] != a.Token() || holders[b.Key()] != b.Token() {
		t.Fatalf("holders by slot %v; want %s: %s and %s: %s", holders, a.Key(), a.Token(), b.Key(), b.Token())
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !poll(t, 10*time.Second, func() bool {
		slots, err := sem.Inspect(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, st := range slots {
			for _, n := range st.Nodes {
				if n.Held {
					held++
				}
			}
		}
		return held == 3 // b's slot on every node, a's on none
	}) {
		t.Fatalf("a released permit is still shown: %+v", slots)
	}
	if _, err := c.locker(t).Semaphore("seen", 0).Inspect(t.Context()); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Inspect of a semaphore of 0: %v, want ErrInvalid", err)
	}
}

// Inspect of a read-write lock shows its readers' leases, then its writer.
func TestRWMutexInspect(t *testing.T) {
	c := newCluster(t, 3)
	rw := c.locker(t).RWMutex("seen")
	r1, r2 := mustTake(t, "TryRLock", rw.TryRLock), mustTake(t, "TryRLock", rw.TryRLock)
	for _, r := range []*redlock.Lock{r1, r2} {
		c.heldEverywhere(t, r.Key(), r.Token())
	}
	writer, readers, err := rw.Inspect(t.Context())
	if err != nil || writer == nil || writer.Holder != "" || len(readers) != 2 {
		t.Fatalf("Inspect with two readers: writer %+v, %d readers, %v", writer, len(readers), err)
	}
	for _, st := range readers {
		if (st.Key != r1.Key() || st.Holder != r1.Token()) && (st.Key != r2.Key() || st.Holder != r2.Token()) {
			t.Fatalf("reader %s held by %q; want one of %s, %s", st.Key, st.Holder, r1.Token(), r2.Token())
		}
	}
	for _, r := range []*redlock.Lock{r1, r2} {
		if err := r.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if !c.emptied(t, r1.Key(), r2.Key()) {
		t.Fatal("leases left after their release")
	}
	w := mustTake(t, "TryLock", rw.TryLock)
	writer, readers, err = rw.Inspect(t.Context())
	if err != nil || writer.Holder != w.Token() || len(readers) != 0 {
		t.Fatalf("Inspect with a writer: writer %q (want %q), %d readers, %v", writer.Holder, w.Token(), len(readers), err)
	}
}
