// Command bench compares redlock's single-node and quorum modes with
// go-redsync/redsync, bsm/redislock and rueidis's rueidislock on the same
// Redis servers, and with a floor that only sends the round trips a lock
// needs.
//
// By default it starts seven local redis-server processes on free loopback
// ports (five for the tables, seven for the scaling scenario) and stops
// them at the end; -nodes uses running servers instead, at least five
// (such as the docker-compose ones). It prints tables of medians over
// rounds on stdout, progress on stderr, and writes every figure to a JSON
// file and two charts (the scenarios, and scaling) to SVG or PNG files.
//
//	go run .            # the full run, a few minutes
//	go run . -quick     # every mode and scenario in well under a minute
//	go run . -scenarios clusters,clusters-fresh   # standalone servers against cluster nodes
//	go run . -nodes 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003,127.0.0.1:7004,127.0.0.1:7005
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/quorumlock/redlock/bench/internal/harness"
	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/bench/internal/report"
	"github.com/quorumlock/redlock/internal/redistest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	def := harness.DefaultConfig()
	var (
		nodes      = flag.String("nodes", "", "use these running servers (host:port,..., at least five) instead of starting local ones")
		quick      = flag.Bool("quick", false, "short run for CI: 2 rounds of 150ms windows")
		rounds     = flag.Int("rounds", def.Rounds, "rounds; the table shows medians over rounds")
		duration   = flag.Duration("duration", def.Duration, "measured window per mode and scenario")
		warmup     = flag.Duration("warmup", def.Warmup, "unmeasured warm-up before each window")
		grace      = flag.Duration("grace", def.Grace, "how long operations begun in a window may finish after it")
		workers    = flag.Int("workers", def.Workers, "throughput: goroutines, each on its own key")
		many       = flag.Int("many-workers", def.ManyWorkers, "throughput-many and throughput-many-fresh: goroutines, for redlock's modes")
		contenders = flag.Int("contenders", def.Contenders, "contention: goroutines on one key")
		hold       = flag.Duration("hold", def.Hold, "contention: how long each holder keeps the lock")
		slow       = flag.Duration("slow", def.SlowLatency, "slow-node: latency added to each reply of one node")
		out        = flag.String("out", "results", "directory for the JSON file and the chart")
		jsonPath   = flag.String("json", "", "JSON output file (default <out>/bench.json)")
		chartPath  = flag.String("chart", "", "chart file, .svg or .png (default <out>/bench.svg)")
		scalePath  = flag.String("scalechart", "", "scaling chart file, .svg or .png (default <out>/scaling.svg)")
		scaleW     = flag.String("scale-workers", ints(def.ScaleWorkers), "scaling: worker counts, comma-separated; empty with empty -scale-nodes skips scaling")
		scaleN     = flag.String("scale-nodes", ints(def.ScaleNodes), "scaling: node counts, at -workers workers, comma-separated")
		scaleD     = flag.Duration("scale-duration", def.ScaleDuration, "scaling: measured window per point")
		from       = flag.String("from", "", "run nothing: print the table and draw the chart of this earlier JSON file")
		modes      = flag.String("modes", "", "only these modes, as impl/nodes (redlock/5,redsync/5); default all")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the run (the benchmark process only) to this file")
		scens      = flag.String("scenarios", "", "only these scenarios (uncontended,throughput,contention,slow-node,node-down,server-time,scaling; on fresh keys, for redlock's modes: uncontended-fresh,throughput-fresh,throughput-many,throughput-many-fresh,server-time-fresh); default all but clusters,clusters-fresh, which run only when named (redlock over 3 local servers beside 3 local Redis Clusters of each -shards count)")
		shards     = flag.String("shards", ints(def.Shards), "clusters, clusters-fresh: masters of each cluster node, one comparison per count, comma-separated")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}

	if *jsonPath == "" {
		*jsonPath = filepath.Join(*out, "bench.json")
	}
	if *chartPath == "" {
		*chartPath = filepath.Join(*out, "bench.svg")
	}
	if *scalePath == "" {
		*scalePath = filepath.Join(*out, "scaling.svg")
	}
	for _, p := range []string{*chartPath, *scalePath} {
		if ext := strings.ToLower(filepath.Ext(p)); ext != ".svg" && ext != ".png" {
			return fmt.Errorf("chart %s: want a .svg or .png file", p)
		}
	}
	for _, p := range []string{*jsonPath, *chartPath, *scalePath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}

	if *from != "" {
		rep, err := report.ReadJSON(*from)
		if err != nil {
			return err
		}
		if err := rep.WriteTable(os.Stdout); err != nil {
			return err
		}
		return writeCharts(rep, *chartPath, *scalePath)
	}

	cfg := def
	if *quick {
		cfg = harness.QuickConfig()
	}
	// Flags given explicitly win over the -quick settings.
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "rounds":
			cfg.Rounds = *rounds
		case "duration":
			cfg.Duration = *duration
		case "warmup":
			cfg.Warmup = *warmup
		case "grace":
			cfg.Grace = *grace
		case "workers":
			cfg.Workers = *workers
		case "many-workers":
			cfg.ManyWorkers = *many
		case "contenders":
			cfg.Contenders = *contenders
		case "hold":
			cfg.Hold = *hold
		case "slow":
			cfg.SlowLatency = *slow
		case "scale-duration":
			cfg.ScaleDuration = *scaleD
		}
	})
	for _, f := range []struct {
		name string
		val  string
		dst  *[]int
	}{{"scale-workers", *scaleW, &cfg.ScaleWorkers}, {"scale-nodes", *scaleN, &cfg.ScaleNodes}, {"shards", *shards, &cfg.Shards}} {
		if !isSet(f.name) {
			continue
		}
		v, err := parseInts(f.val)
		if err != nil {
			return fmt.Errorf("-%s: %w", f.name, err)
		}
		*f.dst = v
	}
	if *modes != "" {
		cfg.Modes = nil
		for m := range strings.SplitSeq(*modes, ",") {
			mode, err := parseMode(m)
			if err != nil {
				return err
			}
			cfg.Modes = append(cfg.Modes, mode)
		}
	}
	if *scens != "" {
		cfg.Scenarios = strings.Split(*scens, ",")
	}
	if *nodes != "" {
		for a := range strings.SplitSeq(*nodes, ",") {
			if a = strings.TrimSpace(a); a != "" {
				cfg.Nodes = append(cfg.Nodes, a)
			}
		}
	} else if _, err := exec.LookPath("redis-server"); err != nil {
		return fmt.Errorf("%s; or pass -nodes with at least five running servers", redistest.InstallHint)
	}

	// Ctrl-C ends the run cleanly, so the local servers are stopped.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	harness.Quiet()
	cfg.Progress = os.Stderr

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := harness.Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted")
		}
		return err
	}
	rep.Command = "go run . " + strings.Join(os.Args[1:], " ")
	if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	if err := rep.WriteJSON(*jsonPath); err != nil {
		return err
	}
	if err := writeCharts(rep, *chartPath, *scalePath); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s and the charts in %s\n", *jsonPath, rep.Finished.Sub(rep.Started).Round(1e9))
	return nil
}

// writeCharts draws the scenarios' chart (the server-time scenarios and
// the node-kind comparison have none) and, when the scaling scenario ran,
// the scaling chart, naming on stderr what it wrote.
func writeCharts(rep *report.Report, chartPath, scalePath string) error {
	if slices.ContainsFunc(rep.Results, func(x report.Result) bool {
		return x.Scenario != report.Scaling && x.Scenario != report.ServerTime && x.Scenario != report.ServerTimeFresh &&
			!report.IsClusters(x.Scenario)
	}) {
		if err := rep.WriteChart(chartPath); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", chartPath)
	}
	if !rep.HasScaling() {
		fmt.Fprintln(os.Stderr, "no scaling results: no", scalePath)
		return nil
	}
	if err := rep.WriteScalingChart(scalePath); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", scalePath)
	return nil
}

// isSet reports whether the flag was given on the command line.
func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// ints formats a list as the flags take it: "1,4,16".
func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// parseInts reads "1,4,16"; an empty string is an empty list.
func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive whole numbers, comma-separated", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseMode reads "impl/nodes", one of the harness's modes.
func parseMode(s string) (lockers.Mode, error) {
	for _, m := range lockers.Modes() {
		if fmt.Sprintf("%s/%d", m.Impl, m.Nodes) == strings.TrimSpace(s) {
			return m, nil
		}
	}
	return lockers.Mode{}, fmt.Errorf("unknown mode %q: want impl/nodes, one of the table's rows", s)
}
