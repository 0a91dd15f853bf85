package harness_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/bench/internal/harness"
	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/bench/internal/report"
)

func TestMain(m *testing.M) {
	harness.Quiet()
	// After repeated failed dials (the node-down scenario) a go-redis pool
	// starts a prober that sleeps a second between dials and only sees on
	// waking that its client was closed. It is go-redis's, and it ends.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// TestRunSmall runs every mode through every scenario briefly on local
// servers: the harness end to end, in a couple of seconds.
func TestRunSmall(t *testing.T) {
	cfg := harness.QuickConfig()
	cfg.Rounds = 1
	cfg.Duration = 30 * time.Millisecond
	cfg.Warmup = 5 * time.Millisecond
	cfg.Grace = 500 * time.Millisecond
	cfg.Workers = 8
	cfg.ManyWorkers = 16
	cfg.Contenders = 4
	// A slow node well above the machine's noise (a loaded machine under
	// -race has shown 100ms medians in these 30ms windows), so that the
	// check that it was off before it went on cannot mistake noise for
	// the fault. Still below redsync's per-node timeout (400ms).
	cfg.SlowLatency = 100 * time.Millisecond
	cfg.ScaleWorkers = []int{1, 4}
	cfg.ScaleNodes = []int{1, 3, 5, 7}
	cfg.ScaleDuration = cfg.Duration
	cfg.ScaleWarmup = cfg.Warmup
	var progress strings.Builder
	cfg.Progress = &progress

	rep, err := harness.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Settings.LocalServers || len(rep.Settings.Nodes) != harness.LocalNodes {
		t.Errorf("settings: %+v", rep.Settings)
	}

	var serverCPU float64
	for _, m := range lockers.Modes() {
		scenarios := []string{report.Uncontended, report.Throughput}
		if m.Excludes() {
			scenarios = append(scenarios, report.Contention)
		} else if rep.Find(m.Impl, m.Nodes, report.Contention) != nil {
			t.Errorf("%s: a contention result for the floor", m.Name())
		}
		if m.Quorum() {
			scenarios = append(scenarios, report.SlowNode, report.NodeDown)
		} else {
			for _, s := range []string{report.SlowNode, report.NodeDown} {
				if rep.Find(m.Impl, m.Nodes, s) != nil {
					t.Errorf("%s: a %s result for a single-node mode", m.Name(), s)
				}
			}
		}
		for _, s := range scenarios {
			r := rep.Find(m.Impl, m.Nodes, s)
			if r == nil || len(r.Rounds) != 1 {
				t.Errorf("%s %s: result %+v", m.Name(), s, r)
				continue
			}
			// Under contention a 30ms window can close before anyone
			// gets the lock (redsync retries 50-250ms apart), but every
			// worker's wait is counted.
			done := report.Ops
			if s == report.Contention {
				done = report.WaitP99
			}
			// Errors are the libraries' to report (a node call can time
			// out on a loaded machine under -race, and a 30ms window may
			// hold a single failed call); the harness's job is to measure
			// something and count it.
			if r.Median[done] <= 0 && (s == report.Contention || r.Median[report.Errors] <= 0) {
				t.Errorf("%s %s: figures %v", m.Name(), s, r.Median)
			}
			// The servers' CPU per pair: never more than the machine's
			// cores can give in the window.
			if (s == report.Uncontended || s == report.Throughput) && r.Median[report.Ops] > 0 {
				limit := float64(runtime.NumCPU()) * float64((cfg.Duration+cfg.Grace)/time.Microsecond)
				c, ok := r.Median[report.ServerCPU]
				if !ok || c < 0 || c*r.Median[report.Ops] > limit {
					t.Errorf("%s %s: server CPU %vµs per pair over %v pairs", m.Name(), s, c, r.Median[report.Ops])
				}
				serverCPU += c
			}
			// A fault is measured against the same path just before it.
			if (s == report.SlowNode || s == report.NodeDown) && r.Median[report.BaseP50] <= 0 {
				t.Errorf("%s %s: no baseline p50 in %v", m.Name(), s, r.Median)
			}
			if !strings.Contains(progress.String(), fmt.Sprintf("%s  %s", pad(s), m.Name())) {
				t.Errorf("no progress line for %s %s", s, m.Name())
			}
		}
	}

	if serverCPU <= 0 {
		t.Error("no server CPU time measured in any mode")
	}

	// The server time per acquisition and per release, apart, for
	// redlock's modes only: each acquisition and release is a script call
	// on every node, whose own time is part of the server's CPU.
	for _, m := range lockers.Modes() {
		r := rep.Find(m.Impl, m.Nodes, report.ServerTime)
		if !strings.HasPrefix(m.Impl, lockers.Redlock) {
			if r != nil {
				t.Errorf("%s: a server-time result", m.Name())
			}
			continue
		}
		if r == nil || len(r.Rounds) != 1 || r.Median[report.Ops] <= 0 {
			t.Errorf("%s server-time: result %+v", m.Name(), r)
			continue
		}
		// The CPU figures may be 0 in a window this short (the kernel
		// accounts in ticks); the scripts' own time is counted in µs.
		for _, k := range []string{report.AcquireCPU, report.AcquireScript, report.ReleaseCPU, report.ReleaseScript} {
			if v, ok := r.Median[k]; !ok || v < 0 || (v == 0 && (k == report.AcquireScript || k == report.ReleaseScript)) {
				t.Errorf("%s server-time: %s = %v in %v", m.Name(), k, v, r.Median)
			}
		}
	}

	// The distinct-key workload and the throughput at many workers, for
	// redlock's modes only.
	for _, m := range lockers.Modes() {
		for _, s := range []string{report.UncontendedFresh, report.ThroughputFresh, report.ThroughputMany, report.ThroughputManyFresh, report.ServerTimeFresh} {
			r := rep.Find(m.Impl, m.Nodes, s)
			if !m.Ours() {
				if r != nil {
					t.Errorf("%s: a %s result", m.Name(), s)
				}
				continue
			}
			if r == nil || len(r.Rounds) != 1 || (r.Median[report.Ops] <= 0 && r.Median[report.Errors] <= 0) {
				t.Errorf("%s %s: result %+v", m.Name(), s, r)
			}
		}
	}

	// redsync by default waits for every node, the slow one included, on
	// both Obtain and Release: proof that the latency was in place.
	if p50 := rep.Find(lockers.Redsync, 5, report.SlowNode).Median[report.P50]; p50 < 2*float64(cfg.SlowLatency/time.Microsecond) {
		t.Errorf("redsync slow-node p50 = %vµs, want at least twice %v", p50, cfg.SlowLatency)
	}
	// ...and that it was off again for the baseline measured before it:
	// with the latency on, no redsync pair can take less than two slow
	// replies (Obtain and Release each wait for every node), so a baseline
	// below that proves it off. Load only adds time, so noise cannot fake
	// it; it could only hide it, by more than 200ms.
	if sl := rep.Find(lockers.Redsync, 5, report.SlowNode).Median; sl[report.BaseP50] >= 2*float64(cfg.SlowLatency/time.Microsecond) {
		t.Errorf("redsync p50 %vµs just before the slow node, %vµs with it: want the latency off before (below twice %v)",
			sl[report.BaseP50], sl[report.P50], cfg.SlowLatency)
	}
	// The floor decides without the slow node, as our quorum does.
	if sl := rep.Find(lockers.Floor, 5, report.SlowNode).Median; sl[report.P50] >= float64(cfg.SlowLatency/time.Microsecond) {
		t.Errorf("floor slow-node p50 = %vµs, want below the %v it would wait for the slow node", sl[report.P50], cfg.SlowLatency)
	}

	// Scaling: every mode of the workers axis at each worker count, every
	// implementation of the nodes axis at each node count it supports.
	for _, m := range lockers.ScalingByWorkers() {
		for _, w := range cfg.ScaleWorkers {
			if r := rep.FindScaled(m.Impl, m.Nodes, w); r == nil || r.Median[report.Ops] <= 0 {
				t.Errorf("scaling %s workers=%d: %+v", m.Name(), w, r)
			}
		}
	}
	for _, impl := range lockers.ScalingByNodes() {
		for _, n := range cfg.ScaleNodes {
			r := rep.FindScaled(impl, n, cfg.Workers)
			if lockers.Supports(impl, n) != (r != nil) {
				t.Errorf("scaling %s nodes=%d: supported %v, result %+v", impl, n, lockers.Supports(impl, n), r)
			} else if r != nil && r.Median[report.Ops] <= 0 {
				t.Errorf("scaling %s nodes=%d: figures %v", impl, n, r.Median)
			}
		}
	}
	if len(rep.Ratios) == 0 {
		t.Error("no ratios")
	}

	dir := t.TempDir()
	if err := rep.WriteJSON(dir + "/bench.json"); err != nil {
		t.Error(err)
	}
	if err := rep.WriteChart(dir + "/bench.svg"); err != nil {
		t.Error(err)
	}
	if err := rep.WriteScalingChart(dir + "/scaling.svg"); err != nil {
		t.Error(err)
	}
	if err := rep.WriteTable(&strings.Builder{}); err != nil {
		t.Error(err)
	}
}

// TestRunClusters runs the node-kind comparison briefly: plain redlock
// over three standalone servers and over three clusters of one and of two
// shards, on both workloads, each kind measured with its servers' and the
// client's CPU time.
func TestRunClusters(t *testing.T) {
	cfg := harness.QuickConfig()
	cfg.Rounds = 1
	cfg.Duration = 30 * time.Millisecond
	cfg.Warmup = 5 * time.Millisecond
	cfg.Grace = 500 * time.Millisecond
	cfg.Workers = 8
	cfg.Modes = []lockers.Mode{{Impl: lockers.Redlock, Nodes: 3}}
	cfg.Scenarios = []string{report.Clusters, report.ClustersFresh}
	cfg.Shards = []int{1, 2}
	var progress strings.Builder
	cfg.Progress = &progress

	rep, err := harness.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Settings; s.ClusterNodes != harness.ClusterNodes || fmt.Sprint(s.ClusterShards) != "[1 2]" {
		t.Errorf("settings: %d nodes, shards %v", s.ClusterNodes, s.ClusterShards)
	}
	for _, sc := range cfg.Scenarios {
		for _, shards := range []int{0, 1, 2} {
			r := rep.FindKind(sc, shards)
			if r == nil || len(r.Rounds) != 1 {
				t.Errorf("%s shards=%d: result %+v", sc, shards, r)
				continue
			}
			checkKindFigures(t, fmt.Sprintf("%s shards=%d", sc, shards), r.Median)
		}
		for _, what := range []string{"redlock over 3 servers", "redlock over 3 clusters of 1 shards", "redlock over 3 clusters of 2 shards"} {
			if !strings.Contains(progress.String(), pad(sc)+"  "+what) {
				t.Errorf("no progress line for %s %s:\n%s", sc, what, progress.String())
			}
		}
	}
	// The comparison is its own table; the other tables stay empty.
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "Node kinds: 3 nodes") || strings.Contains(table.String(), "Throughput: ") {
		t.Errorf("table:\n%s", table.String())
	}
}

// checkKindFigures checks a node kind's figures: pairs done (or failures
// counted), and with pairs done, their latency, the scripts' server time
// (counted in µs, so never 0 once a script ran on the shards read) and
// the client's CPU time.
func checkKindFigures(t *testing.T, name string, f report.Figures) {
	t.Helper()
	if f[report.Ops] <= 0 {
		if f[report.Errors] <= 0 {
			t.Errorf("%s: neither pairs nor errors in %v", name, f)
		}
		return
	}
	for _, k := range []string{report.OpsPerSec, report.P50, report.NodeScript, report.ClientCPU} {
		if v, ok := f[k]; !ok || v <= 0 {
			t.Errorf("%s: %s = %v in %v", name, k, v, f)
		}
	}
	// The servers' CPU may be 0 in a window this short (the kernel
	// accounts in ticks), never below.
	if v, ok := f[report.NodeServerCPU]; !ok || v < 0 {
		t.Errorf("%s: %s = %v in %v", name, report.NodeServerCPU, v, f)
	}
}

func pad(s string) string { return fmt.Sprintf("%-11s", s) }

// writerFunc is an io.Writer that calls itself.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestRunStopsWithContext ends the context once the cluster is up and the
// first step has begun: Run must stop with the context's error rather
// than run on or fail for another reason.
func TestRunStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg := harness.QuickConfig()
	started := false
	cfg.Progress = writerFunc(func(p []byte) (int, error) {
		if strings.HasPrefix(string(p), "[  1/") {
			started = true
			cancel()
		}
		return len(p), nil
	})
	rep, err := harness.Run(ctx, cfg)
	if !started {
		t.Fatalf("Run never began its first step: %v", err)
	}
	if !errors.Is(err, context.Canceled) || rep != nil {
		t.Fatalf("Run cancelled after its first step = %v, %v; want nil, context.Canceled", rep, err)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for name, mutate := range map[string]func(*harness.Config){
		"no rounds":          func(c *harness.Config) { c.Rounds = 0 },
		"no duration":        func(c *harness.Config) { c.Duration = 0 },
		"no workers":         func(c *harness.Config) { c.Workers = 0 },
		"zero scale workers": func(c *harness.Config) { c.ScaleWorkers = []int{1, 0} },
		"zero scale nodes":   func(c *harness.Config) { c.ScaleNodes = []int{0} },
		"unknown scenario":   func(c *harness.Config) { c.Scenarios = []string{"scalling"} },
		"zero shards":        func(c *harness.Config) { c.Scenarios, c.Shards = []string{report.Clusters}, []int{1, 0} },
		"no shard counts":    func(c *harness.Config) { c.Scenarios, c.Shards = []string{report.ClustersFresh}, nil },
		"clusters on given nodes": func(c *harness.Config) {
			c.Scenarios = []string{report.Clusters}
			c.Nodes = []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"}
		},
		"four nodes given": func(c *harness.Config) {
			c.Nodes = []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := harness.QuickConfig()
			mutate(&cfg)
			if _, err := harness.Run(t.Context(), cfg); err == nil {
				t.Error("Run succeeded")
			}
		})
	}
}
