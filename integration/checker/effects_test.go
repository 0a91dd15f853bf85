package checker_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/internal/redistest"
)

// TestStoreEffects checks the effects checker against a real Redis: two
// holders interleaving their read-modify-writes lose an update unless
// fencing turns the stale one away.
func TestStoreEffects(t *testing.T) {
	type op struct {
		who     string
		write   bool
		fence   uint64
		checked bool
		// late makes a write land after its writer's deadline (a
		// writer stalled past its validity); in time otherwise.
		late bool
	}
	tests := []struct {
		name    string
		ops     []op // a read, then later a write, of each holder
		want    checker.Effects
		wantErr map[int]error // op index → error
	}{
		{"one after the other", []op{
			{"a", false, 1, false, false}, {"a", true, 1, false, false},
			{"b", false, 2, false, false}, {"b", true, 2, false, false},
		}, checker.Effects{Checked: true, Writes: 2}, nil},
		{"interleaved without fencing loses an update", []op{
			{"a", false, 0, false, false}, {"b", false, 0, false, false},
			{"b", true, 0, false, false}, {"a", true, 0, false, false},
		}, checker.Effects{Checked: true, Writes: 2, LostUpdates: 1}, nil},
		{"interleaved, unchecked fences still lose it", []op{
			{"a", false, 1, false, false}, {"b", false, 2, false, false},
			{"b", true, 2, false, false}, {"a", true, 1, false, false},
		}, checker.Effects{Checked: true, Writes: 2, LostUpdates: 1}, nil},
		{"interleaved, a checked stale write is rejected", []op{
			{"a", false, 1, true, false}, {"b", false, 2, false, false},
			{"b", true, 2, false, false}, {"a", true, 1, true, false},
		}, checker.Effects{Checked: true, Writes: 1, StaleWrites: 1}, map[int]error{3: checker.ErrStale}},
		{"interleaved, a late unchecked writer's loss is counted apart", []op{
			{"a", false, 1, false, false}, {"b", false, 2, false, false},
			{"b", true, 2, false, false}, {"a", true, 1, false, true},
		}, checker.Effects{Checked: true, Writes: 2, LateLost: 1, LateWrites: 1}, nil},
		{"interleaved, a late checked writer's loss is a lost update", []op{
			{"b", false, 2, false, false}, {"a", false, 2, true, false},
			{"b", true, 2, false, false}, {"a", true, 2, true, true},
		}, checker.Effects{Checked: true, Writes: 2, LostUpdates: 1, LateWrites: 1}, nil},
		{"a checked read after a newer one is rejected", []op{
			{"b", false, 2, false, false}, {"a", false, 1, true, false},
		}, checker.Effects{Checked: true, StaleReads: 1}, map[int]error{1: checker.ErrStale}},
	}
	srv := redistest.StartT(t, 1, redistest.Options{})[0]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := srv.NewClient()
			err := rc.FlushAll(t.Context()).Err()
			if cerr := rc.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			s := checker.NewStore(srv.Addr)
			t.Cleanup(func() { _ = s.Close() })
			read := map[string]int64{}
			for i, o := range tt.ops {
				if o.write {
					deadline := time.Now().Add(time.Hour)
					if o.late {
						deadline = time.Now().Add(-time.Second)
					}
					err = s.Write(t.Context(), "k", o.fence, o.checked, read[o.who], deadline, o.who)
				} else {
					read[o.who], err = s.Read(t.Context(), "k", o.fence, o.checked)
				}
				if want := tt.wantErr[i]; !errors.Is(err, want) || (want == nil && err != nil) {
					t.Fatalf("op %d (%+v): %v, want %v", i, o, err, want)
				}
			}
			got, err := s.Effects(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Lost) != got.LostUpdates+got.LateLost {
				t.Errorf("%d+%d lost updates but %d described: %q", got.LostUpdates, got.LateLost, len(got.Lost), got.Lost)
			}
			got.Lost = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("effects %+v, want %+v", got, tt.want)
			}
			if tt.want.LostUpdates > 0 && !strings.Contains(got.String(), "lost updates") {
				t.Errorf("report %q", got.String())
			}
		})
	}
}
