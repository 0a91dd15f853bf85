// Package stats computes the summary figures of the benchmark harness:
// latency percentiles within a round and medians across rounds.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample such that at least p percent of
// the samples are at or below it. It returns 0 for no samples. sorted must
// be in ascending order.
//
// Nearest rank never interpolates, so a figure in the table is always a
// latency that was actually measured.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Latencies are the percentiles of one set of samples.
type Latencies struct {
	P50, P90, P99, P999 time.Duration
}

// Summarize sorts samples in place and returns their percentiles.
func Summarize(samples []time.Duration) Latencies {
	slices.Sort(samples)
	return Latencies{
		P50:  Percentile(samples, 50),
		P90:  Percentile(samples, 90),
		P99:  Percentile(samples, 99),
		P999: Percentile(samples, 99.9),
	}
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), ignoring NaNs, or NaN when no value is left. xs is not
// modified.
func Median(xs []float64) float64 {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	mid := len(s) / 2
	if len(s)%2 == 1 {
		return s[mid]
	}
	return (s[mid-1] + s[mid]) / 2
}
