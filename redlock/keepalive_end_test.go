package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// ended fails the test unless ctx has ended already, with a cause that
// matches want, and ErrLockLost only if lost.
func ended(t *testing.T, what string, ctx context.Context, want error, lost bool) {
	t.Helper()
	select {
	case <-ctx.Done():
	default:
		t.Fatalf("%s: the context is still live", what)
	}
	if cause := context.Cause(ctx); !errors.Is(cause, want) || errors.Is(cause, redlock.ErrLockLost) != lost {
		t.Fatalf("%s: cause %v; want %v (ErrLockLost: %v)", what, cause, want, lost)
	}
}

// Release ends the contexts KeepAlive handed out for the lock as it
// begins, without stop being called, and KeepAlive on a released lock
// returns a context ended already: work watching them must not run on as
// if it held the lock.
func TestReleaseEndsKeepAlive(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "k")
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	held2, stop2 := lock.KeepAlive(t.Context())
	defer stop2()
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	ended(t, "after Release", held, redlock.ErrReleased, false)
	ended(t, "second KeepAlive after Release", held2, redlock.ErrReleased, false)
	// Another owner takes the key: nothing tells the old work but its
	// context.
	mustObtain(t, c.locker(t), "k")
	late, stop3 := lock.KeepAlive(t.Context())
	defer stop3()
	ended(t, "KeepAlive on a released lock", late, redlock.ErrReleased, false)
}

// Close ends every KeepAlive and Leadership context of the Locker as it
// begins, as lost (nothing extends them) because of ErrClosed; KeepAlive
// after Close returns an ended context.
func TestCloseEndsKeepAliveAndLeadership(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	lock := mustObtain(t, l, "k")
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	lead, err := l.Campaign(t.Context(), "election")
	if err != nil {
		t.Fatal(err)
	}
	kept := mustObtain(t, l, "k2")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ended(t, "KeepAlive after Close", held, redlock.ErrClosed, true)
	ended(t, "Leadership after Close", lead.Context(), redlock.ErrClosed, true)
	late, stop2 := kept.KeepAlive(t.Context())
	defer stop2()
	ended(t, "KeepAlive called after Close", late, redlock.ErrClosed, true)
}

// A KeepAlive whose keys a ForceRelease through the same Locker removed
// says so when it ends, not that the lock expired.
func TestKeepAliveAfterForceReleaseSaysSo(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithTTL(time.Second), redlock.WithNodeTimeout(100*time.Millisecond))
	lock := mustObtain(t, l, "k")
	held, stop := lock.KeepAlive(t.Context())
	defer stop()
	if err := l.ForceRelease(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("KeepAlive's context still live 10s after ForceRelease")
	}
	cause := context.Cause(held)
	if !errors.Is(cause, redlock.ErrLockNotHeld) || strings.Contains(cause.Error(), "expired") || !strings.Contains(cause.Error(), "ForceRelease") {
		t.Fatalf("cause %q; want a loss that names ForceRelease, not an expiry", cause)
	}
	t.Logf("cause: %v", cause)
}
