package redlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
	proto "github.com/quorumlock/redlock/redlock/internal/wire"
)

// holdKind is one way of holding a lock, for the tests of the admin paths:
// how to take it, how to make one node refuse it to another owner, how to
// take it again as that other owner, and the admin paths of its kind.
type holdKind struct {
	kind proto.Kind
	// take takes the hold through l; block makes node i refuse it to
	// others, unblock ends that; again is a second owner's try.
	take    func(t *testing.T, l *redlock.Locker) *redlock.Lock
	block   func(t *testing.T, c *cluster, i int)
	unblock func(t *testing.T, c *cluster, i int)
	again   func(ctx context.Context, l *redlock.Locker) (*redlock.Lock, error)
	// name is how errors name the lock; force and inspect are its kind's
	// ForceRelease and Inspect (holder: the token that holds it on a
	// majority, "" for none).
	name    string
	force   func(ctx context.Context, l *redlock.Locker) error
	inspect func(ctx context.Context, l *redlock.Locker) (holder string, err error)
}

const foreign = "foreign\x001\x00"

// holdKinds are the kinds of keys that hold a lock (proto.Kind.Holds), each
// taken through the API that makes it.
func holdKinds() []holdKind {
	setOn := func(key string) func(t *testing.T, c *cluster, i int) {
		return func(t *testing.T, c *cluster, i int) {
			t.Helper()
			if err := c.clients[i].Set(t.Context(), key, foreign, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	delOn := func(key string) func(t *testing.T, c *cluster, i int) {
		return func(t *testing.T, c *cluster, i int) {
			t.Helper()
			if err := c.clients[i].Del(t.Context(), key).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	holderOf := func(st *redlock.Status, err error) (string, error) {
		if st == nil {
			return "", err
		}
		return st.Holder, err
	}
	return []holdKind{{
		kind:    proto.Lock,
		take:    func(t *testing.T, l *redlock.Locker) *redlock.Lock { return mustObtain(t, l, "mutex") },
		block:   setOn("mutex"),
		unblock: delOn("mutex"),
		again:   func(ctx context.Context, l *redlock.Locker) (*redlock.Lock, error) { return l.TryObtain(ctx, "mutex") },
		name:    `the lock key "mutex"`,
		force:   func(ctx context.Context, l *redlock.Locker) error { return l.ForceRelease(ctx, "mutex") },
		inspect: func(ctx context.Context, l *redlock.Locker) (string, error) { return holderOf(l.Inspect(ctx, "mutex")) },
	}, {
		kind:    proto.Permit,
		take:    func(t *testing.T, l *redlock.Locker) *redlock.Lock { return mustPermit(t, l.Semaphore("s1", 1)) },
		block:   setOn(proto.SemSlot("s1", 0)),
		unblock: delOn(proto.SemSlot("s1", 0)),
		again: func(ctx context.Context, l *redlock.Locker) (*redlock.Lock, error) {
			return l.Semaphore("s1", 1).TryObtain(ctx)
		},
		name:  `a permit of semaphore "s1"`,
		force: func(ctx context.Context, l *redlock.Locker) error { return l.Semaphore("s1", 1).ForceRelease(ctx) },
		inspect: func(ctx context.Context, l *redlock.Locker) (string, error) {
			sts, err := l.Semaphore("s1", 1).Inspect(ctx)
			if len(sts) != 1 {
				return "", err
			}
			return sts[0].Holder, err
		},
	}, {
		kind: proto.Lease,
		take: func(t *testing.T, l *redlock.Locker) *redlock.Lock {
			return mustTake(t, "TryRLock", l.RWMutex("rw").TryRLock)
		},
		// A writer on the node keeps readers out there.
		block:   setOn("rw"),
		unblock: delOn("rw"),
		again: func(ctx context.Context, l *redlock.Locker) (*redlock.Lock, error) {
			return l.RWMutex("rw").TryLock(ctx)
		},
		name:  `a reader's lease of read-write lock "rw"`,
		force: func(ctx context.Context, l *redlock.Locker) error { return l.RWMutex("rw").ForceRelease(ctx) },
		inspect: func(ctx context.Context, l *redlock.Locker) (string, error) {
			_, readers, err := l.RWMutex("rw").Inspect(ctx)
			if len(readers) != 1 {
				return "", err
			}
			return readers[0].Holder, err
		},
	}}
}

// Every kind of key that holds a lock has a way to take it in holdKinds,
// and no other kind does: a new kind of hold must be added there, where
// every admin path is checked against it.
func TestHoldKindsCoverEveryKind(t *testing.T) {
	var holds []proto.Kind
	for _, k := range proto.Kinds() {
		if k.Holds() {
			holds = append(holds, k)
		}
	}
	var tested []proto.Kind
	for _, hk := range holdKinds() {
		tested = append(tested, hk.kind)
	}
	if !slices.Equal(holds, tested) {
		t.Fatalf("kinds that hold a lock: %v; holdKinds tests %v", holds, tested)
	}
}

// ClearQuarantine sees every kind of hold, a semaphore's permit and a
// reader's lease too: A holds on nodes 0 and 1 (node 2 refused it), node 1
// restarts empty and abstains, and ClearQuarantine must not end its
// quarantine while A's hold lives on node 0, or B would take the lock on
// nodes 1 and 2 beside A.
func TestClearQuarantineSeesEveryHold(t *testing.T) {
	for _, hk := range holdKinds() {
		t.Run(hk.kind.String(), func(t *testing.T) {
			c := newCluster(t, 3)
			a, b := c.bootstrapped(t), c.bootstrapped(t)
			hk.block(t, c, 2)
			lock := hk.take(t, a)
			hk.unblock(t, c, 2)
			if err := c.servers[1].Restart(); err != nil { // empty: no persistence
				t.Fatal(err)
			}
			err := b.Bootstrap(t.Context(), redlock.ClearQuarantine())
			if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), hk.name) {
				t.Fatalf("ClearQuarantine while %s is held: %v; want ErrInvalid naming it", hk.name, err)
			}
			if strings.Contains(err.Error(), proto.SemPrefix) || strings.Contains(err.Error(), proto.RWPrefix) {
				t.Errorf("the error names an internal key: %v", err)
			}
			if got, err := hk.again(t.Context(), b); err == nil {
				t.Fatalf("B took %s (%s) while A's is valid: %v", hk.name, got.Key(), lock.Valid())
			}
			if !lock.Valid() {
				t.Fatal("A's lock expired before B tried (slow machine?): the test shows nothing")
			}
		})
	}
}

// ForceRelease and Inspect of each kind see its hold: Inspect names the
// holder, ForceRelease removes every key of the lock from every node (its
// size key, index of leases and mark too), and the holder's next Release
// says it was force-released, though the ForceRelease went through another
// Locker (another process, as the CLI's release --force is).
func TestForceReleaseAndInspectSeeEveryHold(t *testing.T) {
	for _, hk := range holdKinds() {
		t.Run(hk.kind.String(), func(t *testing.T) {
			c := newCluster(t, 3)
			l, admin := c.locker(t), c.locker(t)
			lock := hk.take(t, l)
			holder, err := hk.inspect(t.Context(), l)
			if err != nil || holder != lock.Token() {
				t.Fatalf("Inspect: holder %q, %v; want %q", holder, err, lock.Token())
			}
			if err := hk.force(t.Context(), admin); err != nil {
				t.Fatal(err)
			}
			if keys := c.keysOf(t, hk.kind); len(keys) > 0 {
				t.Fatalf("ForceRelease left %q", keys)
			}
			if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrLockExpired) || !strings.Contains(err.Error(), "force-released") {
				t.Fatalf("Release after ForceRelease: %v; want ErrLockNotHeld saying it was force-released", err)
			}
			if holder, err := hk.inspect(t.Context(), l); err != nil || holder != "" {
				t.Fatalf("Inspect after ForceRelease: holder %q, %v", holder, err)
			}
		})
	}
}

// keysOf lists the keys on every node that belong to the lock a hold of
// kind makes (all but fencing counters, force-release notes and the
// guard's and nonces' keys).
func (c *cluster) keysOf(t *testing.T, kind proto.Kind) []string {
	t.Helper()
	var out []string
	for i, cl := range c.clients {
		keys, err := cl.Keys(t.Context(), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			switch proto.KindOf(k) {
			case proto.Fence, proto.Forced, proto.Nonce, proto.Marker, proto.Quarantine, proto.Passed:
				continue
			}
			out = append(out, strings.Join([]string{kind.String(), string(rune('0' + i)), k}, ":"))
		}
	}
	return out
}

// Every kind of key that holds no lock leaves ClearQuarantine free to
// clear: each kind of wire.Kinds but the holds, written as the library
// writes it, is no reason to refuse.
func TestClearQuarantineIgnoresBookkeeping(t *testing.T) {
	examples := map[proto.Kind][2]string{
		proto.SemSizeKey: {proto.SemSize("s"), "2"},
		proto.LeaseIndex: {proto.RWIndex("rw"), ""}, // a set
		proto.WriterMark: {proto.RWMark("rw"), "1"},
		proto.Fence:      {proto.FenceKey("k"), "1795879839488570"},
		proto.Marker:     {proto.GuardMarker, ""}, // Bootstrap writes it
		proto.Quarantine: {proto.GuardQuarantine, ""},
		proto.Passed:     {proto.GuardPassed, "0123abc 0"},
		proto.Nonce:      {proto.CallKey("n"), ""},
		proto.Probe:      {proto.CheckPrefix + "x", "tok\x001\x00"},
		proto.Forced:     {proto.ForcedKey("k"), "tok\x001\x00"}, // the removed hold's value
	}
	c := newCluster(t, 3)
	l := c.locker(t)
	for _, k := range proto.Kinds() {
		ex, ok := examples[k]
		switch {
		case k.Holds():
			continue
		case !ok:
			t.Fatalf("no example of a %s key", k)
		case proto.KindOf(ex[0]) != k:
			t.Fatalf("%q is a %s key, not a %s key", ex[0], proto.KindOf(ex[0]), k)
		}
		for _, cl := range c.clients {
			var err error
			switch {
			case k == proto.LeaseIndex:
				err = cl.SAdd(t.Context(), ex[0], proto.RWLease("rw", "00000000-0000-0000-0000-000000000000")).Err()
			case ex[1] != "":
				err = cl.Set(t.Context(), ex[0], ex[1], time.Minute).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Bootstrap(t.Context(), redlock.ClearQuarantine()); err != nil {
		t.Fatalf("ClearQuarantine with no hold but the library's bookkeeping: %v", err)
	}
}
