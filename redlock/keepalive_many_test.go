package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// keptLock is a lock under KeepAlive.
type keptLock struct {
	lock *redlock.Lock
	held context.Context
	stop context.CancelFunc
	// obtained is Until as Obtain left it.
	obtained time.Time
}

// keepMany obtains n locks on keys prefix-0.. with the given number of
// goroutines, puts each under KeepAlive, and stops and releases them at
// cleanup.
func keepMany(t *testing.T, l *redlock.Locker, prefix string, n, workers int) []keptLock {
	t.Helper()
	kept := make([]keptLock, n)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				lock, err := l.Obtain(t.Context(), fmt.Sprintf("%s-%d", prefix, i))
				if err != nil {
					errs <- err
					return
				}
				held, stop := lock.KeepAlive(t.Context())
				kept[i] = keptLock{lock, held, stop, lock.Until()}
			}
		})
	}
	wg.Wait()
	close(errs)
	t.Cleanup(func() {
		for _, k := range kept {
			if k.lock != nil {
				k.stop()
				_ = k.lock.Release(context.Background()) // lost ones fail
			}
		}
	})
	for err := range errs {
		t.Fatal(err)
	}
	return kept
}

// awaitAll waits, up to limit, until ok holds for every lock in kept,
// and returns how many it does not hold for then.
func awaitAll(kept []keptLock, limit time.Duration, ok func(keptLock) bool) (missing int) {
	deadline := time.Now().Add(limit)
	for {
		missing = 0
		for _, k := range kept {
			if !ok(k) {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return missing
		}
		// Nothing to wait on: an extension changes Until only.
		time.Sleep(20 * time.Millisecond)
	}
}

// Two thousand locks under KeepAlive while a majority of the nodes hangs
// for over a quarter of the TTL: every extension round
// in that time fails, and is retried within the validity, so no lock is
// lost. Locks whose keys a majority of nodes say are another's are lost
// (ErrLockLost), at once; keys taken on a minority only do not end a lock.
func TestKeepAliveManyLocksRideOutSlowNodes(t *testing.T) {
	const (
		n = 2000
		// Generous for a loaded machine: the warning comes 750ms before
		// Until, and a lock's validity outlasts the stall by 2.3s or more.
		ttl         = 9 * time.Second
		nodeTimeout = 300 * time.Millisecond
		stall       = 2500 * time.Millisecond // over a quarter of the TTL
	)
	c := newCluster(t, 5)
	l := newLocker(t, c.clients, redlock.WithTTL(ttl), redlock.WithNodeTimeout(nodeTimeout))
	kept := keepMany(t, l, "many", n, 8)
	// Every lock extended once: the scheduler works at all.
	if m := awaitAll(kept, 2*ttl, func(k keptLock) bool { return k.lock.Until().After(k.obtained) }); m > 0 {
		for _, k := range kept {
			if !k.lock.Until().After(k.obtained) {
				t.Logf("%s: Until %v from now, held %v", k.lock.Key(), time.Until(k.lock.Until()), context.Cause(k.held))
				break
			}
		}
		t.Fatalf("%d of %d locks were not extended within %v", m, n, 2*ttl)
	}

	// Ten keys taken by another owner on three of five nodes, ten on two.
	taken := func(keys []keptLock, nodes ...int) {
		t.Helper()
		for _, i := range nodes {
			cl := c.servers[i].NewClient()
			for _, k := range keys {
				if err := cl.Set(t.Context(), k.lock.Key(), "thief\x001\x00", ttl).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := cl.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	lost, minority, rest := kept[:10], kept[10:20], kept[20:]
	taken(lost, 0, 1, 2)
	taken(minority, 3, 4)
	if m := awaitAll(lost, ttl, func(k keptLock) bool { return k.held.Err() != nil }); m > 0 {
		t.Fatalf("%d of %d locks taken on a majority were not reported lost within the TTL", m, len(lost))
	}
	for _, k := range lost {
		if cause := context.Cause(k.held); !errors.Is(cause, redlock.ErrLockLost) || errors.Is(cause, redlock.ErrLockExpired) {
			t.Fatalf("%s: cause %v, want ErrLockLost (held by another), not expiry", k.lock.Key(), cause)
		}
		if k.lock.Valid() {
			t.Fatalf("%s: Valid after it was reported lost", k.lock.Key())
		}
	}

	// A majority of nodes hangs (SIGSTOP) for over a quarter of the TTL:
	// most
	// locks' next extension falls within it, and every round in it times
	// out; the calls queued for those nodes run when they wake.
	stallStart := time.Now()
	for _, s := range c.servers[2:] {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(stall) // the fault's duration
	// The stall was real: no extension begun after it started has
	// succeeded by its end. Checked before the nodes wake: a round begun
	// in the stall's last node timeout may still succeed once they answer.
	for _, k := range append(rest, minority...) {
		if u := k.lock.Until(); u.After(stallStart.Add(ttl)) {
			t.Fatalf("%s: extended during the stall (Until %v after its start): the nodes were not slow", k.lock.Key(), u.Sub(stallStart))
		}
	}
	for _, s := range c.servers[2:] {
		if err := s.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	stallEnd := time.Now()
	// Every lock comes through: extended after the stall, never lost.
	ok := func(k keptLock) bool {
		return k.held.Err() == nil && k.lock.Until().After(stallEnd.Add(ttl/2))
	}
	m := awaitAll(append(rest, minority...), ttl, ok)
	gone := 0
	for _, k := range append(rest, minority...) {
		if k.held.Err() != nil {
			if gone == 0 {
				t.Errorf("%s lost: %v", k.lock.Key(), context.Cause(k.held))
			}
			gone++
		}
	}
	if gone > 0 || m > 0 {
		t.Fatalf("after the stall, %d of %d locks were lost and %d more not extended", gone, n-len(lost), m-gone)
	}
}

// A hung node does not hold KeepAlive's extensions up: a round ends as soon
// as every key in it is decided, so the lock's new Until is known a few
// milliseconds after the round began, not one node timeout later (when, for
// an extension begun at the last moment, the warning has already ended the
// lock). The round's start is read back from the new Until: Until is the
// start plus the TTL less the drift and the time its majority took.
func TestKeepAliveHungNodeDoesNotHoldUpExtensions(t *testing.T) {
	const (
		ttl         = 3 * time.Second
		nodeTimeout = time.Second
	)
	c := newSlowCluster(t, 3)
	l := newLocker(t, c.clients, redlock.WithTTL(ttl), redlock.WithNodeTimeout(nodeTimeout))
	lock := mustObtain(t, l, "hung")
	c.forwards[2].SetDelay(time.Minute) // hung: its replies never come in time
	obtained := lock.Until()
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	for range 2 { // two extensions in a row
		var seen time.Time
		for seen.IsZero() {
			if held.Err() != nil {
				t.Fatalf("lost: %v", context.Cause(held))
			}
			if lock.Until().After(obtained) {
				seen = time.Now()
				break
			}
			time.Sleep(time.Millisecond) // polls Until; nothing to await
		}
		until := lock.Until()
		// The drift margin is 1% of the TTL plus 2ms; a majority's answers
		// take a few more.
		began := until.Add(-ttl + ttl/100 + 2*time.Millisecond)
		if lag := seen.Sub(began); lag > nodeTimeout/2 {
			t.Fatalf("the extension's Until came %v after its round began, want well under the %v node timeout the hung node could hold it", lag, nodeTimeout)
		}
		obtained = until
	}
	if held.Err() != nil {
		t.Fatalf("lost: %v", context.Cause(held))
	}
}
