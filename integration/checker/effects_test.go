package checker_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

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
	}
	tests := []struct {
		name    string
		ops     []op // a read, then later a write, of each holder
		want    checker.Effects
		wantErr map[int]error // op index → error
	}{
		{"one after the other", []op{
			{"a", false, 1, false}, {"a", true, 1, false},
			{"b", false, 2, false}, {"b", true, 2, false},
		}, checker.Effects{Checked: true, Writes: 2}, nil},
		{"interleaved without fencing loses an update", []op{
			{"a", false, 0, false}, {"b", false, 0, false},
			{"b", true, 0, false}, {"a", true, 0, false},
		}, checker.Effects{Checked: true, Writes: 2, LostUpdates: 1}, nil},
		{"interleaved, unchecked fences still lose it", []op{
			{"a", false, 1, false}, {"b", false, 2, false},
			{"b", true, 2, false}, {"a", true, 1, false},
		}, checker.Effects{Checked: true, Writes: 2, LostUpdates: 1}, nil},
		{"interleaved, a checked stale write is rejected", []op{
			{"a", false, 1, true}, {"b", false, 2, false},
			{"b", true, 2, false}, {"a", true, 1, true},
		}, checker.Effects{Checked: true, Writes: 1, StaleWrites: 1}, map[int]error{3: checker.ErrStale}},
		{"a checked read after a newer one is rejected", []op{
			{"b", false, 2, false}, {"a", false, 1, true},
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
					err = s.Write(t.Context(), "k", o.fence, o.checked, read[o.who], o.who)
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
			if len(got.Lost) != got.LostUpdates {
				t.Errorf("%d lost updates but %d described: %q", got.LostUpdates, len(got.Lost), got.Lost)
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
