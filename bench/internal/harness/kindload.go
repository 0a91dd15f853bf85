package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/bench/internal/report"
	"github.com/quorumlock/redlock/bench/internal/stats"
)

// pairsUnderLoad is the throughput workload (workers goroutines, each
// doing Obtain+Release back to back on its own key or, fresh, a new key
// each time) that also times every pair: it returns the pairs per second
// and the percentiles of the pairs' durations under that load.
func pairsUnderLoad(ctx context.Context, impl lockers.Impl, keyPrefix string, fresh bool, workers int, d, grace time.Duration) report.Figures {
	ctx, cancel := context.WithTimeout(ctx, d+grace)
	defer cancel()
	type tally struct {
		errs    int
		samples []time.Duration
	}
	tallies := make([]tally, workers)
	win := window{time.Now(), d}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			w := impl.NewWorker()
			uctx := context.WithoutCancel(ctx)
			ks := keys{key: fmt.Sprintf("%s:%d", keyPrefix, i), fresh: fresh}
			t := &tallies[i]
			t.samples = make([]time.Duration, 0, 1024)
			// At least one attempt each, as throughput does.
			for first := true; first || (win.open() && ctx.Err() == nil); first = false {
				t0 := time.Now()
				if err := w.Lock(ctx, ks.next(), true); err != nil {
					t.errs++
					continue
				}
				if err := w.Unlock(uctx); err != nil {
					t.errs++
					continue
				}
				t.samples = append(t.samples, time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(win.start)
	var samples []time.Duration
	errs := 0
	for _, t := range tallies {
		samples, errs = append(samples, t.samples...), errs+t.errs
	}
	f := report.Figures{
		report.Ops:       float64(len(samples)),
		report.Errors:    float64(errs),
		report.OpsPerSec: float64(len(samples)) / elapsed.Seconds(),
	}
	if len(samples) > 0 {
		l := stats.Summarize(samples)
		f[report.P50], f[report.P99], f[report.P999] = us(l.P50), us(l.P99), us(l.P999)
	}
	return f
}

// shardStats reads the counters of every server of the kind, shard by
// shard.
func (k *nodeKind) shardStats(ctx context.Context) ([]serverStats, error) {
	out := make([]serverStats, len(k.servers))
	for i, c := range k.servers {
		s, err := readServerStats(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("%s, server %d: %w", k.name(), i+1, err)
		}
		out[i] = s
	}
	return out, nil
}

// measureKind runs pairsUnderLoad on the kind after a warm-up, with the
// servers' counters read around it and the process's CPU time around
// that (so the readings' own client time is left out), and adds the
// server and client CPU figures per pair.
func measureKind(ctx context.Context, cfg *Config, k *nodeKind, key string, fresh bool) (report.Figures, error) {
	if cfg.Warmup > 0 {
		pairsUnderLoad(ctx, k.impl, key+":warmup", fresh, cfg.Workers, cfg.Warmup, cfg.Grace)
	}
	before, err := k.shardStats(ctx)
	if err != nil {
		return nil, err
	}
	c0, cerr0 := processCPU()
	f := pairsUnderLoad(ctx, k.impl, key, fresh, cfg.Workers, cfg.Duration, cfg.Grace)
	c1, cerr1 := processCPU()
	after, err := k.shardStats(ctx)
	if err != nil {
		return nil, err
	}
	ops := f[report.Ops]
	if ops == 0 {
		return f, nil
	}
	var work, script, busiest float64
	for i := range after {
		d := after[i].sub(before[i])
		work, script, busiest = work+d.workCPU(), script+d.scriptUsec, max(busiest, d.workCPU())
	}
	f[report.NodeServerCPU] = work / ops / ClusterNodes
	f[report.NodeScript] = script / ops / ClusterNodes
	if work > 0 {
		f[report.ShardSkew] = busiest / (work / float64(len(after)))
	}
	if cerr0 == nil && cerr1 == nil {
		f[report.ClientCPU] = us(c1-c0) / ops
	}
	return f, nil
}

// kindsRound runs one round of the node-kind comparison: each scenario
// (report.Clusters, report.ClustersFresh) on every kind, in an order
// rotated by the round, so that no kind always runs first or right after
// the same one. step names each step on the progress writer.
func kindsRound(ctx context.Context, cfg *Config, rep *report.Report, kinds []*nodeKind, scens []string, round int, runID string,
	step func(round int, scenario, what string)) error {
	for _, sc := range scens {
		for _, k := range rotate(kinds, round) {
			if err := ctx.Err(); err != nil {
				return err
			}
			step(round, sc, k.name())
			key := fmt.Sprintf("redlock-bench:%s:%d:%s:shards=%d", runID, round, sc, k.shards)
			f, err := measureKind(ctx, cfg, k, key, sc == report.ClustersFresh)
			if err != nil {
				return fmt.Errorf("%s: %w", sc, err)
			}
			r := rep.FindKind(sc, k.shards)
			r.Rounds = append(r.Rounds, f)
		}
	}
	return nil
}

// kindScenarios returns the node-kind scenarios cfg asks for by name: they
// never run by default.
func kindScenarios(cfg *Config) []string {
	var out []string
	for _, s := range []string{report.Clusters, report.ClustersFresh} {
		if slices.Contains(cfg.Scenarios, s) {
			out = append(out, s)
		}
	}
	return out
}
