package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// checkUserText fails t if msg, an error text a user sees, breaks a rule:
// one line; no script reply code; no key of the library's own; no
// doubled prefix; no node said to be "not waited for" (a healthy node
// that the round did not need).
func checkUserText(t *testing.T, what, msg string) {
	t.Helper()
	for _, bad := range []string{"\n", "INVALID ", "ABSTAIN ", "SIZE ", `"redlock:`, "redlock: redlock:", ": redlock: ", "not waited for"} {
		if strings.Contains(msg, bad) {
			t.Errorf("%s: %q contains %q", what, msg, bad)
		}
	}
}

// Every error text a user meets in these paths, from real servers, keeps
// to the rules of checkUserText.
func TestUserErrorTexts(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t)
	ctx := t.Context()
	texts := map[string]func() error{}

	// A semaphore of another size.
	if _, err := l.Semaphore("pool", 3).TryObtain(ctx); err != nil {
		t.Fatal(err)
	}
	texts["semaphore size"] = func() error {
		_, err := l.Semaphore("pool", 2).TryObtain(ctx)
		return err
	}
	// Contention on each kind.
	if _, err := l.TryObtain(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	texts["contention"] = func() error { _, err := l.TryObtain(ctx, "busy"); return err }
	texts["contention, multi"] = func() error { _, err := l.TryObtainMulti(ctx, []string{"busy", "other"}); return err }
	if _, err := l.RWMutex("rw").TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	texts["contention, reader"] = func() error { _, err := l.RWMutex("rw").TryRLock(ctx); return err }
	full := l.Semaphore("one", 1)
	if _, err := full.TryObtain(ctx); err != nil {
		t.Fatal(err)
	}
	texts["contention, permit"] = func() error { _, err := full.TryObtain(ctx); return err }
	// The restart guard before bootstrap.
	guarded := c.locker(t, redlock.WithRestartGuard(time.Minute))
	texts["abstain"] = func() error { _, err := guarded.TryObtain(ctx, "g"); return err }
	// A lock lost to another owner, as KeepAlive's cause tells it.
	texts["lost"] = func() error {
		lock, err := l.TryObtain(ctx, "lost", redlock.WithTTL(5*time.Second))
		if err != nil {
			return err
		}
		kctx, stop := lock.KeepAlive(ctx)
		defer stop()
		for _, cl := range c.clients {
			if err := cl.Set(ctx, "lost", "another\x001\x00", time.Minute).Err(); err != nil {
				return err
			}
		}
		<-kctx.Done()
		return context.Cause(kctx)
	}
	// A release of a lock gone.
	texts["expired"] = func() error {
		lock, err := l.TryObtain(ctx, "gone")
		if err != nil {
			return err
		}
		for _, cl := range c.clients {
			if err := cl.Del(ctx, "gone").Err(); err != nil {
				return err
			}
		}
		return lock.Release(ctx)
	}
	// A release of a lock that another Locker force-released, and that
	// a third owner took since.
	admin := c.locker(t)
	texts["force-released"] = func() error {
		lock, err := l.TryObtain(ctx, "forced")
		if err != nil {
			return err
		}
		if err := admin.ForceRelease(ctx, "forced"); err != nil {
			return err
		}
		return lock.Release(ctx)
	}
	texts["force-released, taken"] = func() error {
		lock, err := l.TryObtain(ctx, "forced-taken")
		if err != nil {
			return err
		}
		if err := admin.ForceRelease(ctx, "forced-taken"); err != nil {
			return err
		}
		if _, err := admin.TryObtain(ctx, "forced-taken"); err != nil {
			return err
		}
		return lock.Release(ctx)
	}
	texts["bad URL"] = func() error { _, err := redlock.NewFromURLs([]string{"redis://h:1/x"}); return err }

	for name, f := range texts {
		err := f()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		checkUserText(t, name, err.Error())
	}
	for _, err := range []error{redlock.ErrNotObtained, redlock.ErrNoQuorum, redlock.ErrLockNotHeld, redlock.ErrLockExpired,
		redlock.ErrLockLost, redlock.ErrReleased, redlock.ErrInvalid, redlock.ErrClosed, redlock.ErrMisconfigured} {
		checkUserText(t, "sentinel", err.Error())
	}
}
