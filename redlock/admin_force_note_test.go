package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
	proto "github.com/quorumlock/redlock/redlock/internal/wire"
)

// A lock that another Locker (another process) force-released is reported
// as force-released by its holder's Extend, KeepAlive and Release, also
// once a new owner took it; a loss that no ForceRelease caused is not.
func TestForceReleaseSeenByOtherLockers(t *testing.T) {
	c := newCluster(t, 3)
	l, admin := c.locker(t), c.locker(t)
	ctx := t.Context()
	forced := func(t *testing.T, what string, err error, want error) {
		t.Helper()
		if !errors.Is(err, want) || !strings.Contains(err.Error(), "force-released") {
			t.Fatalf("%s after another Locker's ForceRelease: %v; want %v saying force-released", what, err, want)
		}
	}

	t.Run("extend", func(t *testing.T) {
		lock := mustObtain(t, l, "fx", redlock.WithTTL(time.Minute))
		// Obtain returns once a majority granted: the hold reaches the
		// third node a moment later, and only a hold there gets a note.
		c.awaitKey(t, "fx")
		if err := admin.ForceRelease(ctx, "fx"); err != nil {
			t.Fatal(err)
		}
		forced(t, "Extend", lock.Extend(ctx, time.Minute), redlock.ErrLockExpired)
		if lock.Valid() {
			t.Error("Valid after the loss")
		}
		// The note lives for what the hold had left, and a minute; its
		// size is what docs/internals.md's table of keys states.
		if size, err := c.clients[0].MemoryUsage(ctx, proto.ForcedKey("fx")).Result(); err == nil {
			t.Logf("a note of key %q: MEMORY USAGE %d B", "fx", size)
		}
		for i, cl := range c.clients {
			left, err := cl.PTTL(ctx, proto.ForcedKey("fx")).Result()
			if err != nil || left <= time.Minute || left > 2*time.Minute {
				t.Errorf("node %d: the note's PTTL is %v (%v), want within (1m, 2m]", i, left, err)
			}
		}
	})

	t.Run("keepalive", func(t *testing.T) {
		lock := mustObtain(t, l, "fk", redlock.WithTTL(time.Second), redlock.WithNodeTimeout(200*time.Millisecond))
		held, stop := lock.KeepAlive(ctx)
		defer stop()
		if err := admin.ForceRelease(ctx, "fk"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-held.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("KeepAlive did not notice the loss")
		}
		forced(t, "KeepAlive", context.Cause(held), redlock.ErrLockLost)
	})

	t.Run("taken since", func(t *testing.T) {
		lock := mustObtain(t, l, "ft", redlock.WithTTL(time.Minute))
		// admin's calls do not queue behind l's: a hold still on its way
		// to a node could land after the ForceRelease there.
		c.awaitKey(t, "ft")
		if err := admin.ForceRelease(ctx, "ft"); err != nil {
			t.Fatal(err)
		}
		thief := mustObtain(t, admin, "ft")
		err := lock.Release(ctx)
		forced(t, "Release", err, redlock.ErrLockLost)
		if !strings.Contains(err.Error(), "taken by another owner") {
			t.Errorf("Release: %v; want it to say another owner took it", err)
		}
		if err := thief.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a later holder's expiry", func(t *testing.T) {
		// The note of the first hold names that hold only: the next
		// holder's keys going away (deleted here, as an expiry would)
		// is an expiry, whatever the note says.
		first := mustObtain(t, l, "fe", redlock.WithTTL(time.Minute))
		c.awaitKey(t, "fe")
		if err := admin.ForceRelease(ctx, "fe"); err != nil {
			t.Fatal(err)
		}
		second := mustObtain(t, l, "fe", redlock.WithTTL(time.Minute))
		// Every node has the second hold before the deletion below: a
		// grant still on its way would outlive it.
		c.awaitKey(t, "fe")
		for _, cl := range c.clients {
			if err := cl.Del(ctx, "fe").Err(); err != nil {
				t.Fatal(err)
			}
		}
		err := second.Extend(ctx, time.Minute)
		if !errors.Is(err, redlock.ErrLockExpired) || strings.Contains(err.Error(), "force-released") {
			t.Errorf("Extend of a lock obtained after the ForceRelease, whose keys expired: %v; want ErrLockExpired, not force-released", err)
		}
		forced(t, "Release of the first hold", first.Release(ctx), redlock.ErrLockExpired)
	})
}
