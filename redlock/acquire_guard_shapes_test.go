package redlock_test

import (
	"context"
	"testing"

	"github.com/quorumlock/redlock/redlock"
)

// A semaphore's permit and a read-write lock's leases are guarded by the
// function library as a mutex is: behind a proxy that keeps B's
// connections while two of three servers are replaced by processes started
// from snapshots older than A's hold, B's acquisition runs as FCALL on the
// new servers, which abstain, and B is kept out.
func TestRestartGuardFunctionShapesBehindProxy(t *testing.T) {
	type take func(context.Context, ...redlock.LockOption) (*redlock.Lock, error)
	shapes := []struct {
		name string
		// takes returns A's way to hold on a and B's attempt on b.
		takes func(a, b *redlock.Locker) (take, take)
	}{
		{"semaphore permit", func(l, m *redlock.Locker) (take, take) {
			return l.Semaphore("s", 1).TryObtain, m.Semaphore("s", 1).TryObtain
		}},
		{"reader beside a writer", func(l, m *redlock.Locker) (take, take) {
			return l.RWMutex("rw").TryLock, m.RWMutex("rw").TryRLock
		}},
		{"writer beside a reader", func(l, m *redlock.Locker) (take, take) {
			return l.RWMutex("rw").TryRLock, m.RWMutex("rw").TryLock
		}},
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			a, b, fwds, copies := guardedBehindProxy(t)
			takeA, takeB := sh.takes(a, b)
			lock := mustTake(t, "A", takeA)
			// B's connections open now, and see A's hold: contention.
			if _, err := takeB(t.Context()); err == nil {
				t.Fatal("B got in beside A's hold before any fault")
			}
			for i, f := range fwds {
				f.MoveTo(copies[i].Addr)
			}
			_, err := takeB(t.Context())
			secondClientKeptOut(t, lock, err, "a proxy moved B's open connections to servers restarted from a snapshot older than A's hold")
			everyFCALLAbstained(t, copies)
		})
	}
}
