package stats_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/bench/internal/stats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ms(ns ...int) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, n := range ns {
		out[i] = time.Duration(n) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample", ms(7), 99.9, 7 * time.Millisecond},
		{"p50 of 1..100", hundred, 50, 50 * time.Millisecond},
		{"p90 of 1..100", hundred, 90, 90 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p99.9 of 1..100 is the maximum", hundred, 99.9, 100 * time.Millisecond},
		{"p50 of an even count is the lower middle", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p51 rounds the rank up", ms(1, 2, 3, 4), 51, 3 * time.Millisecond},
		{"tiny p is the minimum", ms(1, 2, 3), 0.001, time.Millisecond},
		{"p100 is the maximum", ms(1, 2, 3), 100, 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stats.Percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarizeSorts(t *testing.T) {
	samples := ms(5, 1, 4, 2, 3)
	got := stats.Summarize(samples)
	if !slices.IsSorted(samples) {
		t.Errorf("samples not sorted in place: %v", samples)
	}
	want := stats.Latencies{P50: 3 * time.Millisecond, P90: 5 * time.Millisecond, P99: 5 * time.Millisecond, P999: 5 * time.Millisecond}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
}

func TestMedian(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		xs   []float64
		want float64
	}{
		{"odd", []float64{3, 1, 2}, 2},
		{"even averages the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"one", []float64{42}, 42},
		{"NaNs are skipped", []float64{nan, 1, nan, 3, 2}, 2},
		{"robust to one outlier", []float64{10, 11, 12, 10000, 9}, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.xs)
			if got := stats.Median(in); got != tt.want {
				t.Errorf("Median(%v) = %v, want %v", tt.xs, got, tt.want)
			}
			if !slices.EqualFunc(in, tt.xs, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }) {
				t.Errorf("Median modified its input: %v", in)
			}
		})
	}
	for _, xs := range [][]float64{nil, {nan, nan}} {
		if got := stats.Median(xs); !math.IsNaN(got) {
			t.Errorf("Median(%v) = %v, want NaN", xs, got)
		}
	}
}
