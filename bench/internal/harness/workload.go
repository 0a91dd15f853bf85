package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/bench/internal/report"
	"github.com/quorumlock/redlock/bench/internal/stats"
)

// A window is one measurement: it runs from start for d. Operations begun
// inside it may still finish after it, until the caller's grace runs out.
type window struct {
	start time.Time
	d     time.Duration
}

func (w window) open() bool              { return time.Since(w.start) < w.d }
func (w window) inside(t time.Time) bool { return t.Sub(w.start) < w.d }

// keys is a goroutine's run of lock keys: key itself every time (the
// reused-key workload), or, fresh, a new key for every acquisition, as an
// order id or a job id is (the distinct-key workload).
type keys struct {
	key   string
	fresh bool
	n     int
}

// next is the key of the next acquisition.
func (k *keys) next() string {
	if !k.fresh {
		return k.key
	}
	k.n++
	return k.key + ":" + strconv.Itoa(k.n)
}

// latency runs Obtain+Release back to back in one goroutine on one key
// (or, fresh, a new key each time) and returns the percentiles of the
// pairs' durations.
func latency(ctx context.Context, impl lockers.Impl, key string, fresh bool, d, grace time.Duration) report.Figures {
	ctx, cancel := context.WithTimeout(ctx, d+grace)
	defer cancel()
	w := impl.NewWorker()
	// Release even when the window's context has just ended: a user
	// would, and a key left behind would only skew the next run.
	uctx := context.WithoutCancel(ctx)
	samples := make([]time.Duration, 0, 8192)
	errs := 0
	win := window{time.Now(), d}
	ks := keys{key: key, fresh: fresh}
	for win.open() && ctx.Err() == nil {
		key := ks.next()
		t0 := time.Now()
		if err := w.Lock(ctx, key, true); err != nil {
			errs++
			continue
		}
		err := w.Unlock(uctx)
		elapsed := time.Since(t0)
		if err != nil {
			errs++
			continue
		}
		samples = append(samples, elapsed)
	}
	f := report.Figures{report.Ops: float64(len(samples)), report.Errors: float64(errs)}
	if len(samples) > 0 {
		l := stats.Summarize(samples)
		f[report.P50], f[report.P90], f[report.P99], f[report.P999] = us(l.P50), us(l.P90), us(l.P99), us(l.P999)
	}
	return f
}

// throughput runs workers goroutines, each doing Obtain+Release back to
// back on its own key (or, fresh, a new key each time), and returns the
// pairs per second.
func throughput(ctx context.Context, impl lockers.Impl, keyPrefix string, fresh bool, workers int, d, grace time.Duration) report.Figures {
	ctx, cancel := context.WithTimeout(ctx, d+grace)
	defer cancel()
	type tally struct{ ops, errs int }
	tallies := make([]tally, workers)
	win := window{time.Now(), d}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			w := impl.NewWorker()
			uctx := context.WithoutCancel(ctx)
			ks := keys{key: fmt.Sprintf("%s:%d", keyPrefix, i), fresh: fresh}
			t := &tallies[i]
			// Every worker makes at least one attempt: on a loaded
			// machine a goroutine can first run after a short window has
			// closed, and the run would then count nothing at all. The
			// attempt's time is in the elapsed time all the same.
			for first := true; first || (win.open() && ctx.Err() == nil); first = false {
				if err := w.Lock(ctx, ks.next(), true); err != nil {
					t.errs++
					continue
				}
				if err := w.Unlock(uctx); err != nil {
					t.errs++
					continue
				}
				t.ops++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(win.start)
	var ops, errs int
	for _, t := range tallies {
		ops, errs = ops+t.ops, errs+t.errs
	}
	return report.Figures{
		report.Ops:       float64(ops),
		report.Errors:    float64(errs),
		report.OpsPerSec: float64(ops) / elapsed.Seconds(),
	}
}

// contention runs workers goroutines that all want the same key, each
// holding it for hold once obtained. It returns the acquisitions per second
// within the window and the percentiles of the time from calling Obtain to
// holding the lock.
//
// Waits begun in the window are counted even when they end after it (up to
// grace), so the slowest waits are not dropped just because the window
// closed on them; those still waiting after grace are counted as cut, with
// the time they had waited by then.
func contention(ctx context.Context, impl lockers.Impl, key string, workers int, hold, d, grace time.Duration) report.Figures {
	ctx, cancel := context.WithTimeout(ctx, d+grace)
	defer cancel()
	type tally struct {
		acquired, gaveUp, cut, errs int
		waits                       []time.Duration
	}
	tallies := make([]tally, workers)
	win := window{time.Now(), d}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			w := impl.NewWorker()
			uctx := context.WithoutCancel(ctx)
			t := &tallies[i]
			for win.open() && ctx.Err() == nil {
				t0 := time.Now()
				if err := w.Lock(ctx, key, true); err != nil {
					if ctx.Err() != nil {
						// Still waiting at the cut: count the wait so
						// far, a lower bound, rather than drop the
						// longest waits from the tail.
						t.cut++
						t.waits = append(t.waits, time.Since(t0))
					} else {
						t.gaveUp++ // the library ran out of retries
					}
					continue
				}
				got := time.Now()
				t.waits = append(t.waits, got.Sub(t0))
				if win.inside(got) {
					t.acquired++
				}
				sleep(ctx, hold)
				if err := w.Unlock(uctx); err != nil {
					t.errs++
				}
			}
		})
	}
	wg.Wait()
	var waits []time.Duration
	f := report.Figures{}
	var acquired, gaveUp, cut, errs int
	for _, t := range tallies {
		acquired, gaveUp, cut, errs = acquired+t.acquired, gaveUp+t.gaveUp, cut+t.cut, errs+t.errs
		waits = append(waits, t.waits...)
	}
	f[report.Ops] = float64(acquired)
	f[report.AcqPerSec] = float64(acquired) / d.Seconds()
	f[report.GaveUp] = float64(gaveUp)
	f[report.Cut] = float64(cut)
	f[report.Errors] = float64(errs)
	if len(waits) > 0 {
		l := stats.Summarize(waits)
		f[report.WaitP50], f[report.WaitP99] = ms(l.P50), ms(l.P99)
	}
	return f
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
