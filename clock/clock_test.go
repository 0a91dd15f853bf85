package clock_test

import (
	"math"
	"testing"
	"time"

	"github.com/quorumlock/redlock/clock"
)

func TestValidity(t *testing.T) {
	tests := []struct {
		name    string
		ttl     time.Duration
		elapsed time.Duration
		factor  float64
		want    time.Duration
	}{
		{"default factor", 10 * time.Second, 0, 0.01, 10*time.Second - 100*time.Millisecond - 2*time.Millisecond},
		{"elapsed counts", 10 * time.Second, 30 * time.Millisecond, 0.01, 10*time.Second - 30*time.Millisecond - 102*time.Millisecond},
		{"zero factor keeps the precision margin", time.Second, 0, 0, time.Second - 2*time.Millisecond},
		{"slow round leaves nothing", 100 * time.Millisecond, 99 * time.Millisecond, 0.01, -2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clock.Validity(tt.ttl, tt.elapsed, tt.factor); got != tt.want {
				t.Fatalf("Validity(%v, %v, %v) = %v, want %v", tt.ttl, tt.elapsed, tt.factor, got, tt.want)
			}
		})
	}
}

func TestFake(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := clock.NewFake(start)
	f.Advance(1500 * time.Millisecond)
	if got := f.Since(start); got != 1500*time.Millisecond {
		t.Fatalf("Since = %v, want 1.5s", got)
	}
	if got := f.Now(); !got.Equal(start.Add(1500 * time.Millisecond)) {
		t.Fatalf("Now = %v", got)
	}
}

func TestRealIsMonotonic(t *testing.T) {
	a := clock.Real.Now()
	if d := clock.Real.Since(a); d < 0 {
		t.Fatalf("Since went backwards: %v", d)
	}
}

// FuzzValidity checks the properties the lock's safety rests on: validity is
// never more than ttl − elapsed, always leaves at least the fixed precision
// margin, and shrinks as the round gets slower or the drift factor grows.
func FuzzValidity(f *testing.F) {
	f.Add(int64(10*time.Second), int64(5*time.Millisecond), 0.01)
	f.Add(int64(3*time.Millisecond), int64(0), 0.0)
	f.Add(int64(time.Hour), int64(time.Minute), 0.5)
	f.Fuzz(func(t *testing.T, ttlN, elapsedN int64, factor float64) {
		// The library rejects TTLs, elapsed times and factors outside these
		// ranges before the arithmetic runs.
		if ttlN <= 0 || ttlN > int64(365*24*time.Hour) || elapsedN < 0 || elapsedN > ttlN {
			t.Skip()
		}
		if math.IsNaN(factor) || factor < 0 || factor >= 1 {
			t.Skip()
		}
		ttl, elapsed := time.Duration(ttlN), time.Duration(elapsedN)
		v := clock.Validity(ttl, elapsed, factor)
		if v > ttl-elapsed-clock.ExpiryPrecision {
			t.Fatalf("validity %v leaves less than the precision margin of ttl %v − elapsed %v", v, ttl, elapsed)
		}
		if d := clock.Drift(ttl, factor); d < clock.ExpiryPrecision || d > ttl+clock.ExpiryPrecision {
			t.Fatalf("drift %v out of range for ttl %v factor %v", d, ttl, factor)
		}
		if elapsed < ttl {
			if v2 := clock.Validity(ttl, elapsed+1, factor); v2 >= v {
				t.Fatalf("a slower round did not shrink validity: %v then %v", v, v2)
			}
		}
		if factor < 0.9 {
			if v3 := clock.Validity(ttl, elapsed, factor+0.1); v3 > v {
				t.Fatalf("a larger drift factor grew validity: %v then %v", v, v3)
			}
		}
	})
}
