// Package harness runs the benchmark: it sets up the nodes, runs every
// scenario for every mode in rounds, alternating the modes within each
// round, and collects the figures into a report.
package harness

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/bench/internal/report"
)

// maxShards bounds the node-kind comparison's shard counts: each shard is
// a local redis-server, ClusterNodes of them per count.
const maxShards = 16

// NodeCount is how many nodes the tables use: the largest quorum mode.
// Given servers must be at least this many.
const NodeCount = 5

// LocalNodes is how many local servers the harness starts: enough for the
// scaling scenario's largest quorum.
const LocalNodes = 7

// Config is what a run measures and for how long.
type Config struct {
	// Nodes are existing servers (host:port) to use, at least NodeCount;
	// empty starts LocalNodes local redis-server processes.
	Nodes []string
	// Rounds is how many times each mode runs each scenario; the report
	// shows the medians over rounds.
	Rounds int
	// Duration is the measured window of one mode in one scenario.
	Duration time.Duration
	// Warmup runs the same load, unmeasured, before each window.
	Warmup time.Duration
	// Grace is how long operations begun in a window may still finish
	// after it before they are cut off.
	Grace time.Duration
	// Workers is the throughput scenario's goroutine count, each on its
	// own key.
	Workers int
	// ManyWorkers is the goroutine count of the throughput scenarios at
	// many workers (report.ThroughputMany and its fresh-key twin), which
	// run redlock's modes alone.
	ManyWorkers int
	// Contenders is the contention scenario's goroutine count, all on one
	// key, each holding it for Hold.
	Contenders int
	Hold       time.Duration
	// SlowLatency is added to every reply of node FaultNode (0-based) in
	// the slow-node scenario; the node-down scenario makes the same node
	// refuse connections.
	SlowLatency time.Duration
	FaultNode   int
	// ScaleWorkers are the worker counts of the scaling scenario's first
	// axis (lockers.ScalingByWorkers), ScaleNodes the node counts of its
	// second (lockers.ScalingByNodes, at Workers workers). Both empty skip
	// the scenario; node counts above the servers at hand are skipped.
	ScaleWorkers []int
	ScaleNodes   []int
	// ScaleDuration and ScaleWarmup are the scaling scenario's window and
	// warm-up, per point: it has many points, and throughput needs no long
	// window to settle.
	ScaleDuration time.Duration
	ScaleWarmup   time.Duration
	// Modes are the implementations to compare; lockers.Modes() by default.
	// The scaling scenario draws only the implementations named here.
	Modes []lockers.Mode
	// Scenarios, if set, runs only the scenarios named (report.Uncontended
	// and so on); by default all run but the node-kind comparison's
	// (report.Clusters, report.ClustersFresh), which run only when named.
	Scenarios []string
	// Shards are the node-kind comparison's shard counts: it sets plain
	// redlock over ClusterNodes standalone servers beside, for each count,
	// ClusterNodes local Redis Clusters of that many masters each.
	Shards []int
	// Quick marks the short CI run in the report.
	Quick bool
	// Progress receives a line per step; nil for none.
	Progress io.Writer
}

// DefaultConfig is the full run: a few minutes on a small machine.
func DefaultConfig() Config {
	return Config{
		Rounds:      5,
		Duration:    time.Second,
		Warmup:      200 * time.Millisecond,
		Grace:       time.Second,
		Workers:     64,
		ManyWorkers: 1024,
		Contenders:  16,
		Hold:        time.Millisecond,
		SlowLatency: 2 * time.Millisecond,
		FaultNode:   2, // in the 3-node and the 5-node sets
		Modes:       lockers.Modes(),

		ScaleWorkers:  []int{1, 4, 16, 64, 256, 1024},
		ScaleNodes:    []int{1, 3, 5, 7},
		ScaleDuration: 500 * time.Millisecond,
		ScaleWarmup:   100 * time.Millisecond,

		Shards: []int{1, 2, 3},
	}
}

// QuickConfig is the CI run: every mode and scenario, briefly; scaling
// only at 1 and 64 workers (and every node count at 64), so that it stays
// well under a minute.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Rounds = 2
	c.Duration = 150 * time.Millisecond
	c.Warmup = 30 * time.Millisecond
	c.Grace = 300 * time.Millisecond
	c.ScaleWorkers = []int{1, 64}
	c.ScaleDuration = c.Duration
	c.ScaleWarmup = c.Warmup
	c.Quick = true
	return c
}

func (c *Config) validate() error {
	switch {
	case c.Rounds < 1:
		return fmt.Errorf("rounds %d: need at least 1", c.Rounds)
	case c.Duration <= 0 || c.Warmup < 0 || c.Grace < 0:
		return errors.New("duration must be positive, warmup and grace not negative")
	case c.Workers < 1 || c.ManyWorkers < 1 || c.Contenders < 1:
		return errors.New("workers, many workers and contenders must be at least 1")
	case c.Hold < 0 || c.SlowLatency < 0:
		return errors.New("hold and slow latency must not be negative")
	case len(c.Modes) == 0:
		return errors.New("no modes")
	case (len(c.ScaleWorkers) > 0 || len(c.ScaleNodes) > 0) && (c.ScaleDuration <= 0 || c.ScaleWarmup < 0):
		return errors.New("scale duration must be positive, scale warmup not negative")
	}
	for _, w := range c.ScaleWorkers {
		if w < 1 {
			return fmt.Errorf("scale workers %d: need at least 1", w)
		}
	}
	for _, n := range c.ScaleNodes {
		if n < 1 {
			return fmt.Errorf("scale nodes %d: need at least 1", n)
		}
	}
	for _, s := range c.Shards {
		if s < 1 || s > maxShards {
			return fmt.Errorf("shards %d: want 1 to %d masters per cluster", s, maxShards)
		}
	}
	if ks := kindScenarios(c); len(ks) > 0 && len(c.Shards) == 0 {
		return fmt.Errorf("%s: no shard counts", strings.Join(ks, ", "))
	} else if len(ks) > 0 && len(c.Nodes) > 0 {
		return fmt.Errorf("%s: these start local clusters and local servers to compare them with; they do not run on given nodes", strings.Join(ks, ", "))
	}
	for _, name := range c.Scenarios {
		if name != report.Scaling && !report.IsClusters(name) && !slices.ContainsFunc(scenarios(c), func(s scenario) bool { return s.name == name }) {
			return fmt.Errorf("unknown scenario %q", name)
		}
	}
	return nil
}

// scenario is one workload, possibly under a fault.
type scenario struct {
	name string
	// quorumOnly scenarios skip single-node modes: their only node is
	// never the faulty one.
	quorumOnly bool
	// locksOnly scenarios skip the floor: it has nothing to contend for.
	locksOnly bool
	// faulty runs the modes over the client set with the proxied node.
	faulty bool
	// serverCPU measures the servers' CPU time per operation.
	serverCPU bool
	// redlockOnly scenarios run redlock's modes alone: the server-time
	// scenarios count script calls, which are all of redlock's calls; the
	// fresh-key scenarios and those at many workers compare fencing and
	// the guard with plain redlock.
	redlockOnly bool
	// setup injects the fault and returns its undo.
	setup func(*Cluster) (func() error, error)
	run   func(ctx context.Context, impl lockers.Impl, key string, d time.Duration) report.Figures
	// measure, set instead of run, measures with the cluster's own
	// counters in hand, a mode over nodes of it.
	measure func(ctx context.Context, cl *Cluster, impl lockers.Impl, nodes int, key string) (report.Figures, error)
}

func scenarios(cfg *Config) []scenario {
	lat := func(ctx context.Context, impl lockers.Impl, key string, d time.Duration) report.Figures {
		return latency(ctx, impl, key, false, d, cfg.Grace)
	}
	tput := func(workers int, fresh bool) func(ctx context.Context, impl lockers.Impl, key string, d time.Duration) report.Figures {
		return func(ctx context.Context, impl lockers.Impl, key string, d time.Duration) report.Figures {
			return throughput(ctx, impl, key, fresh, workers, d, cfg.Grace)
		}
	}
	srvTime := func(fresh bool) func(ctx context.Context, cl *Cluster, impl lockers.Impl, nodes int, key string) (report.Figures, error) {
		return func(ctx context.Context, cl *Cluster, impl lockers.Impl, nodes int, key string) (report.Figures, error) {
			return serverTime(ctx, cl, impl, nodes, key, fresh, cfg.Workers, cfg.Duration)
		}
	}
	return []scenario{
		{name: report.Uncontended, serverCPU: true, run: lat},
		{name: report.Throughput, serverCPU: true, run: tput(cfg.Workers, false)},
		{name: report.Contention, locksOnly: true, run: func(ctx context.Context, impl lockers.Impl, key string, d time.Duration) report.Figures {
			return contention(ctx, impl, key, cfg.Contenders, cfg.Hold, d, cfg.Grace)
		}},
		{name: report.SlowNode, quorumOnly: true, faulty: true, run: lat,
			setup: func(cl *Cluster) (func() error, error) {
				cl.Proxy.SetDelay(cfg.SlowLatency)
				return func() error { cl.Proxy.SetDelay(0); return nil }, nil
			}},
		{name: report.NodeDown, quorumOnly: true, faulty: true, run: lat,
			setup: func(cl *Cluster) (func() error, error) {
				cl.Proxy.Isolate()
				return cl.Proxy.Reconnect, nil
			}},
		{name: report.ServerTime, redlockOnly: true, measure: srvTime(false)},
		// The distinct-key workload (a new key for every acquisition, as
		// locks on order or job ids take), beside the reused keys above.
		{name: report.UncontendedFresh, redlockOnly: true, serverCPU: true,
			run: func(ctx context.Context, impl lockers.Impl, key string, d time.Duration) report.Figures {
				return latency(ctx, impl, key, true, d, cfg.Grace)
			}},
		{name: report.ThroughputFresh, redlockOnly: true, serverCPU: true, run: tput(cfg.Workers, true)},
		{name: report.ThroughputMany, redlockOnly: true, serverCPU: true, run: tput(cfg.ManyWorkers, false)},
		{name: report.ThroughputManyFresh, redlockOnly: true, serverCPU: true, run: tput(cfg.ManyWorkers, true)},
		{name: report.ServerTimeFresh, redlockOnly: true, measure: srvTime(true)},
	}
}

// modeImpls is one mode set up over both client sets.
type modeImpls struct {
	mode           lockers.Mode
	direct, faulty lockers.Impl
	// scaleOnly modes are set up for the scaling scenario alone.
	scaleOnly bool
}

// Run runs the benchmark and returns its report. It stops early, with
// ctx's error, when ctx ends; local servers are always stopped.
func Run(ctx context.Context, cfg Config) (rep *report.Report, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rep = &report.Report{Started: time.Now(), Env: environment()}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}

	if len(cfg.Nodes) == 0 {
		fmt.Fprintf(progress, "starting %d local redis-server processes\n", LocalNodes)
	}
	cl, err := StartCluster(ctx, cfg.Nodes, cfg.FaultNode)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.Close()) }()
	rep.Env.RedisServer = cl.Version

	var impls []modeImpls
	defer func() {
		for _, m := range impls {
			err = errors.Join(err, m.direct.Close())
			if m.faulty != nil {
				err = errors.Join(err, m.faulty.Close())
			}
		}
	}()
	for _, m := range cfg.Modes {
		mi := modeImpls{mode: m}
		mi.direct, err = lockers.New(m, cl.Direct)
		if err == nil && m.Quorum() {
			mi.faulty, err = lockers.New(m, cl.Faulty)
		}
		if mi.direct != nil {
			impls = append(impls, mi) // closed by the defer above
		}
		if err != nil {
			return nil, err
		}
	}

	rep.Settings = report.Settings{
		Rounds:       cfg.Rounds,
		Duration:     cfg.Duration.String(),
		Warmup:       cfg.Warmup.String(),
		Grace:        cfg.Grace.String(),
		Workers:      cfg.Workers,
		ManyWorkers:  cfg.ManyWorkers,
		Contenders:   cfg.Contenders,
		Hold:         cfg.Hold.String(),
		SlowLatency:  cfg.SlowLatency.String(),
		FaultNode:    cfg.FaultNode,
		Nodes:        cl.Addrs,
		LocalServers: cl.Local(),
		Quick:        cfg.Quick,
	}

	kindScens := kindScenarios(&cfg)
	var kinds []*nodeKind
	defer func() {
		for _, k := range kinds {
			err = errors.Join(err, k.close())
		}
	}()
	if len(kindScens) > 0 {
		if kinds, err = startKinds(ctx, cl, cfg.Shards, progress); err != nil {
			return nil, err
		}
		rep.Settings.ClusterNodes, rep.Settings.ClusterShards = ClusterNodes, cfg.Shards
	}

	var points []scalePoint
	if len(cfg.Scenarios) == 0 || slices.Contains(cfg.Scenarios, report.Scaling) {
		points = scalingPoints(&cfg, len(cl.Direct), progress)
	}
	if len(points) > 0 {
		rep.Settings.ScaleWorkers = cfg.ScaleWorkers
		rep.Settings.ScaleNodes = cfg.ScaleNodes
		rep.Settings.ScaleDuration = cfg.ScaleDuration.String()
	}
	scaleImpls := map[lockers.Mode]lockers.Impl{}
	for _, mi := range impls {
		scaleImpls[mi.mode] = mi.direct
	}
	for _, p := range points {
		if scaleImpls[p.mode] != nil {
			continue
		}
		impl, err := lockers.New(p.mode, cl.Direct)
		if err != nil {
			return nil, err
		}
		scaleImpls[p.mode] = impl
		impls = append(impls, modeImpls{mode: p.mode, direct: impl, scaleOnly: true}) // closed by the defer above
	}

	scens := scenarios(&cfg)
	if len(cfg.Scenarios) > 0 {
		scens = slices.DeleteFunc(scens, func(s scenario) bool { return !slices.Contains(cfg.Scenarios, s.name) })
	}
	tableImpls := slices.DeleteFunc(slices.Clone(impls), func(mi modeImpls) bool { return mi.scaleOnly })
	for _, s := range scens {
		for _, mi := range tableImpls {
			if s.skips(mi.mode) {
				continue
			}
			rep.Results = append(rep.Results, report.Result{Impl: mi.mode.Impl, Nodes: mi.mode.Nodes, Scenario: s.name})
		}
	}
	for _, p := range points {
		rep.Results = append(rep.Results, report.Result{Impl: p.mode.Impl, Nodes: p.mode.Nodes, Scenario: report.Scaling, Workers: p.workers})
	}
	for _, sc := range kindScens {
		for _, k := range kinds {
			rep.Results = append(rep.Results, report.Result{Impl: lockers.Redlock, Nodes: ClusterNodes, Scenario: sc, Shards: k.shards})
		}
	}
	runID := rand.Text()[:8]
	steps, step := len(rep.Results)*cfg.Rounds, 0
	progressStep := func(round int, scenario, what string) {
		step++
		fmt.Fprintf(progress, "[%3d/%d %6s] round %d/%d  %-11s  %s\n", step, steps,
			time.Since(rep.Started).Round(time.Second), round+1, cfg.Rounds, scenario, what)
	}
	for round := range cfg.Rounds {
		// Rotate the order each round, so that no mode always runs first
		// (cold) or right after the heaviest one.
		order := rotate(tableImpls, round)
		for _, s := range scens {
			for _, mi := range order {
				if s.skips(mi.mode) {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				progressStep(round, s.name, mi.mode.Name())
				impl := mi.direct
				if s.faulty {
					impl = mi.faulty
				}
				key := fmt.Sprintf("redlock-bench:%s:%d:%s:%s", runID, round, s.name, strings.ReplaceAll(mi.mode.Name(), "/", ","))
				if s.measure != nil {
					f, err := s.measure(ctx, cl, impl, mi.mode.Nodes, key)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", s.name, err)
					}
					r := rep.Find(mi.mode.Impl, mi.mode.Nodes, s.name)
					r.Rounds = append(r.Rounds, f)
					continue
				}
				measure := func(key string) report.Figures {
					if cfg.Warmup > 0 {
						s.run(ctx, impl, key+":warmup", cfg.Warmup)
					}
					if !s.serverCPU {
						return s.run(ctx, impl, key, cfg.Duration)
					}
					before, err := cl.ServerCPU(ctx)
					f := s.run(ctx, impl, key, cfg.Duration)
					after, aerr := cl.ServerCPU(ctx)
					if err == nil && aerr == nil && f[report.Ops] > 0 {
						f[report.ServerCPU] = (after - before) / f[report.Ops]
					}
					return f
				}
				var base report.Figures
				undo := func() error { return nil }
				if s.setup != nil {
					// A fault's cost is measured against the same mode on
					// the same path (through the proxy) just before the
					// fault is switched on: the machine's load drifts
					// over a run, and the proxy has a cost of its own.
					base = measure(key + ":base")
					if undo, err = s.setup(cl); err != nil {
						return nil, fmt.Errorf("%s: %w", s.name, err)
					}
				}
				f := measure(key)
				if err := undo(); err != nil {
					return nil, fmt.Errorf("%s: undoing the fault: %w", s.name, err)
				}
				if v, ok := base[report.P50]; ok {
					f[report.BaseP50] = v
				}
				r := rep.Find(mi.mode.Impl, mi.mode.Nodes, s.name)
				r.Rounds = append(r.Rounds, f)
			}
		}
		for _, p := range rotate(points, round) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			progressStep(round, report.Scaling, fmt.Sprintf("%s/workers=%d", p.mode.Name(), p.workers))
			key := fmt.Sprintf("redlock-bench:%s:%d:%s:%s,workers=%d", runID, round, report.Scaling,
				strings.ReplaceAll(p.mode.Name(), "/", ","), p.workers)
			impl := scaleImpls[p.mode]
			if cfg.ScaleWarmup > 0 {
				throughput(ctx, impl, key+":warmup", false, p.workers, cfg.ScaleWarmup, cfg.Grace)
			}
			r := rep.FindScaled(p.mode.Impl, p.mode.Nodes, p.workers)
			r.Rounds = append(r.Rounds, throughput(ctx, impl, key, false, p.workers, cfg.ScaleDuration, cfg.Grace))
		}
		if err := kindsRound(ctx, &cfg, rep, kinds, kindScens, round, runID, progressStep); err != nil {
			return nil, err
		}
	}
	rep.Median()
	rep.ComputeRatios()
	rep.Env.LoadAfter = loadAvg()
	rep.Finished = time.Now()
	return rep, nil
}

// skips reports whether the scenario leaves the mode out.
func (s scenario) skips(m lockers.Mode) bool {
	return (s.quorumOnly && !m.Quorum()) || (s.locksOnly && !m.Excludes()) || (s.redlockOnly && !m.Ours())
}

// rotate returns a copy of xs rotated left by n.
func rotate[T any](xs []T, n int) []T {
	if len(xs) == 0 {
		return nil
	}
	n %= len(xs)
	return append(slices.Clone(xs[n:]), xs[:n]...)
}

func environment() report.Env {
	return report.Env{
		GoVersion:  runtime.Version(),
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		LoadBefore: loadAvg(),
	}
}

// loadAvg returns the 1, 5 and 15 minute load averages on Linux, or "".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Quiet silences go-redis's own logging (failed dials to the node that the
// node-down scenario takes away), which would otherwise flood stderr.
func Quiet() { redis.SetLogger(quietLogger{}) }

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
