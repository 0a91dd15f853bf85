package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// entryPoints are the calls that take a lock key, each reduced to its error.
func entryPoints(l *redlock.Locker) map[string]func(ctx context.Context, key string) error {
	return map[string]func(context.Context, string) error{
		"Obtain": func(ctx context.Context, key string) error {
			lock, err := l.Obtain(ctx, key)
			releaseIfHeld(lock)
			return err
		},
		"TryObtain": func(ctx context.Context, key string) error {
			lock, err := l.TryObtain(ctx, key)
			releaseIfHeld(lock)
			return err
		},
		"Do": func(ctx context.Context, key string) error {
			ran := false
			err := l.Do(ctx, key, func(context.Context) error { ran = true; return nil })
			if ran && err == nil {
				return errors.New("fn ran")
			}
			return err
		},
		"Inspect": func(ctx context.Context, key string) error {
			_, err := l.Inspect(ctx, key)
			return err
		},
		"ForceRelease": func(ctx context.Context, key string) error {
			return l.ForceRelease(ctx, key)
		},
	}
}

func releaseIfHeld(lock *redlock.Lock) {
	if lock != nil {
		_ = lock.Release(context.Background())
	}
}

// TestReservedKeysRejected: no entry point lets a lock key reach the
// library's own keys (the restart guard's marker and quarantine, a fencing
// counter, a release channel), and the guard and the fences still work after
// every attempt.
func TestReservedKeysRejected(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithRestartGuard(time.Minute), redlock.WithFencing())
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	first := mustObtain(t, l, "job")
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Inspect waits for every node, behind the acquisition's and the
	// release's last calls: each node's counter is then what it keeps.
	if _, err := l.Inspect(t.Context(), "job"); err != nil {
		t.Fatal(err)
	}
	markers := c.values(t, "redlock:guard:marker")
	fences := c.values(t, "redlock:fence:job")

	bad := []struct{ name, key, want string }{
		{"guard marker", "redlock:guard:marker", "reserved"},
		{"guard quarantine", "redlock:guard:quarantine", "reserved"},
		{"fence counter", "redlock:fence:job", "reserved"},
		{"release channel", "redlock:released:job", "reserved"},
		{"prefix alone", "redlock:", "reserved"},
		{"new internal name", "redlock:future", "reserved"},
		{"empty", "", "empty key"},
		{"too long", strings.Repeat("k", redlock.MaxKeyLen+1), "longer than"},
	}
	for entry, call := range entryPoints(l) {
		for _, tt := range bad {
			t.Run(entry+"/"+tt.name, func(t *testing.T) {
				// A rejected key fails at once; without the check, Obtain
				// would wait for a key that never expires.
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				err := call(ctx, tt.key)
				if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("%s(%.40q): error %v, want ErrInvalid mentioning %q", entry, tt.key, err, tt.want)
				}
				if msg := err.Error(); strings.Contains(msg, "\n") || len(msg) > 200 {
					t.Fatalf("error is not one short line: %q", msg)
				}
			})
		}
	}

	// Nothing of the library's own state changed: every marker and fence
	// counter is still there, and the next holder's fence is higher.
	for i, v := range c.values(t, "redlock:guard:marker") {
		if v == "" || v != markers[i] {
			t.Errorf("node %d: guard marker %q, was %q", i, v, markers[i])
		}
	}
	for i, v := range c.values(t, "redlock:fence:job") {
		if v != fences[i] {
			t.Errorf("node %d: fence counter %q, was %q", i, v, fences[i])
		}
	}
	next := mustObtain(t, l, "job")
	defer releaseIfHeld(next)
	if next.Fence() <= first.Fence() {
		t.Fatalf("fence %d after the rejected calls, not above %d", next.Fence(), first.Fence())
	}
}

// TestKeysLikeReservedOnesWork: only the exact prefix is reserved; keys that
// contain it later, differ in case, or hold odd bytes are ordinary keys, in
// every entry point.
func TestKeysLikeReservedOnesWork(t *testing.T) {
	c := newCluster(t, 3)
	l := c.locker(t, redlock.WithRestartGuard(time.Minute), redlock.WithFencing())
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	keys := []struct{ name, key string }{
		{"prefix later", "app:redlock:guard:marker"},
		{"upper case", "REDLOCK:guard:marker"},
		{"leading space", " redlock:fence:job"},
		{"shorter than prefix", "redlock"},
		{"NUL byte", "a\x00redlock:"},
		{"invalid UTF-8", "\xff\xfe"},
		{"longest", strings.Repeat("k", redlock.MaxKeyLen)},
	}
	for _, tt := range keys {
		t.Run(tt.name, func(t *testing.T) {
			lock := mustObtain(t, l, tt.key)
			// Inspect waits for every node, behind the acquisition's last
			// call (TryObtain returns at a majority).
			st, err := l.Inspect(t.Context(), tt.key)
			if got := c.holders(t, tt.key, lock.Token()); got != 3 {
				t.Fatalf("token on %d nodes, want 3", got)
			}
			if err != nil || st.Holder != lock.Token() {
				t.Fatalf("Inspect: holder %q, error %v; want %q", st.Holder, err, lock.Token())
			}
			if err := lock.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			ran := false
			if err := l.Do(t.Context(), tt.key, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
				t.Fatalf("Do: ran %v, error %v", ran, err)
			}
			again := mustObtain(t, l, tt.key)
			if err := l.ForceRelease(t.Context(), tt.key); err != nil {
				t.Fatal(err)
			}
			if got := c.holders(t, tt.key, again.Token()); got != 0 {
				t.Fatalf("token still on %d nodes after ForceRelease", got)
			}
		})
	}
	// The lookalikes left the guard alone.
	for i, v := range c.values(t, "redlock:guard:marker") {
		if v == "" {
			t.Errorf("node %d lost its guard marker", i)
		}
	}
}
