package fenced_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/locktest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/fenced"
)

// lostAndRetaken returns a lock a whose hold ran out while it did nothing
// (a holder paused past its validity) and the lock b that took it next,
// through obtain (a mutex, a semaphore or a read-write lock's writer).
func lostAndRetaken(t *testing.T, obtain func(ctx context.Context, opts ...redlock.LockOption) (*redlock.Lock, error)) (a, b *redlock.Lock) {
	t.Helper()
	ctx := redistest.BoundedCtx(t)
	a, err := obtain(ctx, redlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// b waits until a's keys expire: a is paused past its validity.
	b, err = obtain(ctx, redlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Release(context.Background()) })
	if a.Valid() {
		t.Fatal("a is still valid after b took the lock")
	}
	if a.Key() != b.Key() || b.Fence() <= a.Fence() {
		t.Fatalf("a (%s, %d) and b (%s, %d): want one key, b's fence above a's", a.Key(), a.Fence(), b.Key(), b.Fence())
	}
	return a, b
}

// A holder paused past its validity comes back after the next holder
// wrote: its update and its insert of a new row are both refused, and
// nothing of its transaction commits.
func TestPausedHolderRefused(t *testing.T) {
	e := newEnv(t)
	l := locktest.FencedT(t)
	a, b := lostAndRetaken(t, func(ctx context.Context, opts ...redlock.LockOption) (*redlock.Lock, error) {
		return l.Obtain(ctx, "ledger", opts...)
	})
	ctx := t.Context()
	if err := e.write(ctx, nil, a, 1, 100); err != nil { // before the pause
		t.Fatal(err)
	}
	if err := e.write(ctx, nil, b, 1, 50); err != nil {
		t.Fatalf("b's update: %v", err)
	}
	if err := e.write(ctx, nil, a, 1, 10); !errors.Is(err, fenced.ErrStaleFence) {
		t.Fatalf("a's late update: %v, want ErrStaleFence", err)
	}
	if err := e.write(ctx, nil, a, 2, 10); !errors.Is(err, fenced.ErrStaleFence) {
		t.Fatalf("a's late insert: %v, want ErrStaleFence", err)
	}
	if v, f, _ := e.row(t, 1); v != 150 || f != int64(b.Fence()) {
		t.Errorf("row 1 = %d with fence %d, want 150 with b's %d", v, f, b.Fence())
	}
	if _, _, ok := e.row(t, 2); ok {
		t.Error("a's late insert committed")
	}
	if got, want := e.applied(t, "ledger"), []int64{int64(a.Fence()), int64(b.Fence())}; !slices.Equal(got, want) {
		t.Errorf("applied fences %v, want %v", got, want)
	}
}

// Claim works in a transaction the caller opened, at any point of it
// before the writes; a refused claim leaves the caller to roll back.
func TestClaimInCallersTransaction(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fences.Claim(ctx, tx, holder{"k", 7}); err != nil {
		t.Fatal(err)
	}
	if err := e.writeIn(ctx, tx, holder{"k", 7}, 1, 1); err != nil {
		t.Fatal(err)
	}
	// The same holder claims again: an equal fence is its own.
	if err := e.fences.Claim(ctx, tx, holder{"k", 7}); err != nil {
		t.Fatalf("claiming an equal fence again: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	tx, err = e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fences.Claim(ctx, tx, holder{"k", 6}); !errors.Is(err, fenced.ErrStaleFence) {
		t.Fatalf("claim of a lower fence: %v, want ErrStaleFence", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if m := e.mark(t, "k"); m != 7 {
		t.Errorf("mark %d, want 7", m)
	}
	for _, h := range []fenced.Holder{holder{"k", 0}, holder{"", 8}, nil} {
		if err := e.write(ctx, nil, h, 1, 1); !errors.Is(err, fenced.ErrInvalid) {
			t.Errorf("write with %v: %v, want ErrInvalid", h, err)
		}
	}
}

// waiting waits until n sessions wait for a lock in the database, and
// fails the test if they do not within 10s.
func waiting(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got int
		err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A claim that waits behind another transaction's claim of the same key:
// what it returns once that one commits, per isolation level and order of
// fences.
func TestClaimWaitingBehindCommit(t *testing.T) {
	for _, tc := range []struct {
		name         string
		iso          sql.IsolationLevel
		first, after uint64
		want         error // of the waiting claim; nil: applied
		retry        error // of the same write retried in a new transaction
	}{
		{"read committed/newer first", sql.LevelReadCommitted, 10, 5, fenced.ErrStaleFence, fenced.ErrStaleFence},
		{"read committed/older first", sql.LevelReadCommitted, 5, 10, nil, nil},
		{"repeatable read/newer first", sql.LevelRepeatableRead, 10, 5, fenced.ErrConflict, fenced.ErrStaleFence},
		{"repeatable read/older first", sql.LevelRepeatableRead, 5, 10, fenced.ErrConflict, nil},
		{"serializable/newer first", sql.LevelSerializable, 10, 5, fenced.ErrConflict, fenced.ErrStaleFence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := t.Context()
			opts := &sql.TxOptions{Isolation: tc.iso}
			first, err := e.db.BeginTx(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.fences.Claim(ctx, first, holder{"k", tc.first}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- e.write(ctx, opts, holder{"k", tc.after}, 1, 1) }()
			waiting(t, e.db, 1)
			if err := e.writeIn(ctx, first, holder{"k", tc.first}, 1, 1); err != nil {
				t.Fatal(err)
			}
			if err := first.Commit(); err != nil {
				t.Fatal(err)
			}
			err = <-done
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("waiting write: %v, want %v", err, tc.want)
			}
			if tc.want != nil {
				err = e.write(ctx, opts, holder{"k", tc.after}, 1, 1)
				if !errors.Is(err, tc.retry) || (tc.retry == nil && err != nil) {
					t.Fatalf("retried write: %v, want %v", err, tc.retry)
				}
			}
			want := []int64{int64(tc.first)}
			if tc.after > tc.first {
				want = append(want, int64(tc.after))
			}
			if got := e.applied(t, "k"); !slices.Equal(got, want) {
				t.Errorf("applied %v, want %v", got, want)
			}
			if v, _, _ := e.row(t, 1); v != int64(len(want)) {
				t.Errorf("row 1 = %d, want %d: an update was lost", v, len(want))
			}
		})
	}
}

// Many holders of one key, with fences in random order, write at once:
// the applied writes commit in increasing fence order, none is lost (each
// read-modify-write sees every earlier one), and the highest fence always
// applies. Under REPEATABLE READ a write retries on ErrConflict.
func TestConcurrentFencedUpdates(t *testing.T) {
	for _, iso := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead} {
		t.Run(iso.String(), func(t *testing.T) {
			e := newEnv(t)
			ctx := t.Context()
			const writers = 40
			start := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			var conflicts, stale sync.Map
			for _, f := range rand.Perm(writers) {
				h := holder{"k", uint64(f + 1)}
				wg.Go(func() {
					<-start
					for {
						err := e.write(ctx, &sql.TxOptions{Isolation: iso}, h, 1, 1)
						switch {
						case errors.Is(err, fenced.ErrConflict):
							conflicts.Store(h.fence, true)
							continue
						case errors.Is(err, fenced.ErrStaleFence):
							stale.Store(h.fence, true)
						case err != nil:
							errs <- err
						}
						return
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			got := e.applied(t, "k")
			for i := 1; i < len(got); i++ {
				if got[i] <= got[i-1] {
					t.Errorf("applied fences not strictly increasing in commit order: %v", got)
					break
				}
			}
			if len(got) == 0 || got[len(got)-1] != writers {
				t.Errorf("the highest fence did not apply: %v", got)
			}
			if v, _, _ := e.row(t, 1); v != int64(len(got)) {
				t.Errorf("row 1 = %d after %d applied writes: updates lost", v, len(got))
			}
			n := 0
			stale.Range(func(any, any) bool { n++; return true })
			if n+len(got) != writers {
				t.Errorf("%d applied + %d refused, want %d", len(got), n, writers)
			}
			c := 0
			conflicts.Range(func(any, any) bool { c++; return true })
			t.Logf("%s: %d applied, %d refused as stale, %d writers met a serialization failure", iso, len(got), n, c)
		})
	}
}

// A semaphore's permits hold different slots, each with its own fence
// counter: each slot keeps its own high-water mark, so concurrent permits
// all write, whatever their fences' order, and a paused permit's slot
// refuses it once its next holder wrote.
func TestSemaphoreSlotsEachHaveAMark(t *testing.T) {
	e := newEnv(t)
	l := locktest.FencedT(t)
	sem := l.Semaphore("pool", 2)
	ctx := redistest.BoundedCtx(t)
	other, err := sem.Obtain(ctx, redlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Release(context.Background()) })
	// With one slot held, a and b take the other one in turn.
	a, b := lostAndRetaken(t, sem.Obtain)
	if a.Key() == other.Key() {
		t.Fatalf("two permits on slot %s", a.Key())
	}
	// Each permit writes its own row; the slots' fences are not ordered
	// with each other, and both write in both orders.
	lo, hi := other, a
	if lo.Fence() > hi.Fence() {
		lo, hi = hi, lo
	}
	for _, p := range []*redlock.Lock{hi, lo, hi, lo} {
		if err := e.write(ctx, nil, p, int64(len(p.Key())), 1); err != nil {
			t.Fatalf("permit %s (fence %d): %v", p.Key(), p.Fence(), err)
		}
	}
	if err := e.write(ctx, nil, b, 100, 1); err != nil {
		t.Fatalf("b: %v", err)
	}
	if err := e.write(ctx, nil, a, 100, 1); !errors.Is(err, fenced.ErrStaleFence) {
		t.Fatalf("paused permit a after b: %v, want ErrStaleFence", err)
	}
	if err := e.write(ctx, nil, other, 100, 1); err != nil {
		t.Fatalf("the other slot's permit after b: %v", err)
	}
	for _, p := range []*redlock.Lock{other, b} {
		if m := e.mark(t, p.Key()); m != int64(p.Fence()) {
			t.Errorf("slot %s: mark %d, want %d", p.Key(), m, p.Fence())
		}
	}
}

// A read-write lock's writers take fences from one counter: a writer
// paused past its validity is refused once the next writer wrote.
func TestRWMutexWriterFence(t *testing.T) {
	e := newEnv(t)
	l := locktest.FencedT(t)
	rw := l.RWMutex("catalog")
	a, b := lostAndRetaken(t, rw.Lock)
	ctx := t.Context()
	if err := e.write(ctx, nil, b, 1, 1); err != nil {
		t.Fatalf("b: %v", err)
	}
	if err := e.write(ctx, nil, a, 1, 1); !errors.Is(err, fenced.ErrStaleFence) {
		t.Fatalf("paused writer a after b: %v, want ErrStaleFence", err)
	}
	// A reader's lease has a fence from the same counter, above b's.
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := rw.RLock(redistest.BoundedCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Release(context.Background()) }()
	if r.Fence() <= b.Fence() {
		t.Errorf("reader's fence %d not above the writer's %d", r.Fence(), b.Fence())
	}
	if v, f, _ := e.row(t, 1); v != 1 || f != int64(b.Fence()) {
		t.Errorf("row 1 = %d with fence %d, want 1 with b's %d", v, f, b.Fence())
	}
}

// A panic in Do's function rolls the transaction back: the key's mark is
// not left locked, and the next claim goes through.
func TestDoRollsBackOnPanic(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		_ = e.fences.Do(ctx, e.db, nil, holder{"k", 5}, func(*sql.Tx) error { panic("work failed") })
	}()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := e.write(wctx, nil, holder{"k", 4}, 1, 1); err != nil {
		t.Fatalf("a lower fence after the rolled-back claim: %v (want applied: nothing was committed)", err)
	}
	if m := e.mark(t, "k"); m != 4 {
		t.Errorf("mark %d, want 4", m)
	}
}
