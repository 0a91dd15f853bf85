package redlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/redlock"
)

func TestReleaseAfterKeepsOthersOut(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "cron")
	hold := 400 * time.Millisecond
	start := time.Now()
	if err := lock.ReleaseAfter(t.Context(), hold); err != nil {
		t.Fatal(err)
	}
	if lock.Valid() {
		t.Fatal("lock valid after ReleaseAfter")
	}
	if _, err := l.TryObtain(t.Context(), "cron"); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryObtain during the cooldown: %v", err)
	}
	// A waiter with a slow timer is still let in soon after the hold ends:
	// it sleeps until the holder's keys expire.
	next, err := l.Obtain(t.Context(), "cron", redlock.WithRetry(redlock.LinearBackoff(5*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	got := time.Since(start)
	if got < hold-50*time.Millisecond || got > hold+400*time.Millisecond {
		t.Fatalf("obtained %v after ReleaseAfter(%v), want just after the hold", got, hold)
	}
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := next.ReleaseAfter(t.Context(), -time.Second); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("negative hold: %v", err)
	}
}

// Nodes killed while a lock is held: Release and Extend report the outage,
// not a false loss.
func TestNodesDieWhileHeld(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "k")
	for _, s := range c.servers[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := lock.Extend(t.Context(), 10*time.Second); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Extend: %v, want ErrNoQuorum", err)
	}
	if !lock.Valid() {
		t.Fatal("an outage during Extend must not end the lock before its deadline")
	}
	if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Release: %v, want ErrNoQuorum", err)
	}
}

func TestReleaseAndExtendTellExpiredFromLost(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)

	t.Run("expired", func(t *testing.T) {
		lock := mustObtain(t, l, "e")
		for _, cl := range c.clients {
			if err := cl.Del(t.Context(), "e").Err(); err != nil { // as if the TTL ran out
				t.Fatal(err)
			}
		}
		err := lock.Extend(t.Context(), 10*time.Second)
		if !errors.Is(err, redlock.ErrLockExpired) || !errors.Is(err, redlock.ErrLockNotHeld) || errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("Extend: %v, want ErrLockExpired under ErrLockNotHeld", err)
		}
		if lock.Valid() {
			t.Fatal("lock valid after the servers said it expired")
		}
		if _, err := lock.TTL(t.Context()); !errors.Is(err, redlock.ErrLockExpired) {
			t.Fatalf("TTL: %v, want ErrLockExpired", err)
		}
		if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrLockExpired) {
			t.Fatalf("Release: %v, want ErrLockExpired", err)
		}
	})

	t.Run("lost", func(t *testing.T) {
		lock := mustObtain(t, l, "x")
		for _, cl := range c.clients {
			if err := cl.Set(t.Context(), "x", "someone-else\x001\x00", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		err := lock.Extend(t.Context(), 10*time.Second)
		if !errors.Is(err, redlock.ErrLockLost) || !errors.Is(err, redlock.ErrLockNotHeld) {
			t.Fatalf("Extend: %v, want ErrLockLost under ErrLockNotHeld", err)
		}
		// Loss is final: even with our keys back, Extend does not revive it.
		for _, cl := range c.clients {
			if err := cl.Set(t.Context(), "x", lock.Token()+"\x001\x00", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := lock.Extend(t.Context(), 10*time.Second); !errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("Extend after loss: %v, want the loss again", err)
		}
		if lock.Valid() {
			t.Fatal("a lost lock turned valid again")
		}
		// Release never deletes another owner's key.
		for _, cl := range c.clients {
			if err := cl.Set(t.Context(), "x", "someone-else\x001\x00", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("Release: %v, want ErrLockLost", err)
		}
		if got := c.holders(t, "x", "someone-else"); got != 3 {
			t.Fatalf("Release removed another owner's key: it remains on %d nodes", got)
		}
	})
}

func TestExtendMovesDeadline(t *testing.T) {
	c := newCluster(t, 3)
	fake := clock.NewFake(time.Now())
	l := c.locker(t, redlock.WithClock(fake), redlock.WithTTL(time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
	lock := mustObtain(t, l, "k")
	first := lock.Until()
	fake.Advance(900 * time.Millisecond)
	if !lock.Valid() {
		t.Fatal("lock invalid before its deadline")
	}
	if err := lock.Extend(t.Context(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !lock.Until().After(first.Add(4 * time.Second)) {
		t.Fatalf("Until moved from %v to %v, want about 5.9s later", first, lock.Until())
	}
	ttl, err := lock.TTL(t.Context())
	if err != nil || ttl <= 4*time.Second || ttl > 5*time.Second {
		t.Fatalf("TTL = %v, %v; want just under 5s", ttl, err)
	}
	fake.Advance(6 * time.Second)
	if lock.Valid() {
		t.Fatal("lock valid past its deadline")
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
