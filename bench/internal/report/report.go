// Package report holds the harness's results and writes them out: an
// aligned table for the terminal, a JSON file with every figure, and a
// chart.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/bench/internal/stats"
)

// Scenario names, also the JSON values.
const (
	Uncontended = "uncontended"
	Throughput  = "throughput"
	Contention  = "contention"
	SlowNode    = "slow-node"
	NodeDown    = "node-down"
	// ServerTime is the servers' time per acquisition and per release,
	// apart, for redlock's modes.
	ServerTime = "server-time"
	// Scaling is throughput against workers and against nodes; its
	// results carry their worker count.
	Scaling = "scaling"
	// ThroughputMany is Throughput at Settings.ManyWorkers workers, for
	// redlock's modes.
	ThroughputMany = "throughput-many"
	// The distinct-key workload: Uncontended, Throughput, ThroughputMany
	// and ServerTime with a new key for every acquisition (as locks on
	// order or job ids take), for redlock's modes; the scenarios above
	// reuse their keys.
	UncontendedFresh    = "uncontended-fresh"
	ThroughputFresh     = "throughput-fresh"
	ThroughputManyFresh = "throughput-many-fresh"
	ServerTimeFresh     = "server-time-fresh"
)

// Metric names, also the JSON keys. Latencies are in microseconds, waits
// in milliseconds.
const (
	P50 = "p50_us"
	// BaseP50 is, in a fault scenario, the p50 of the same mode over the
	// same path (through the proxy) measured just before the fault.
	BaseP50   = "base_p50_us"
	P90       = "p90_us"
	P99       = "p99_us"
	P999      = "p999_us"
	Ops       = "ops"       // completed operations in the measured window
	Errors    = "errors"    // failed Obtain or Release calls
	OpsPerSec = "ops_per_s" // Obtain+Release pairs per second
	// ServerCPU is the servers' CPU time (user and system, every node
	// summed) per completed operation, in µs: what bounds a deployment's
	// lock rate. Measured in the uncontended and throughput scenarios.
	ServerCPU = "server_cpu_us"
	// AcquireCPU and ReleaseCPU are the servers' CPU time (INFO cpu) per
	// acquisition and per release on one node, in µs; AcquireScript and
	// ReleaseScript the part of it in the scripts themselves (INFO
	// commandstats: EVALSHA, EVAL, FCALL), the commands they run
	// included. Measured in the server-time scenario.
	AcquireCPU    = "acquire_server_cpu_us"
	ReleaseCPU    = "release_server_cpu_us"
	AcquireScript = "acquire_script_us"
	ReleaseScript = "release_script_us"
	AcqPerSec     = "acquisitions_per_s"
	WaitP50       = "wait_p50_ms"
	WaitP99       = "wait_p99_ms"
	GaveUp        = "gave_up" // Obtain calls that returned without the lock
	Cut           = "cut"     // waits still unfinished when the run cut them off
)

// Figures are one scenario's numbers for one mode: from one round, or the
// medians over rounds.
type Figures map[string]float64

// Result is one mode in one scenario.
type Result struct {
	Impl     string `json:"impl"`
	Nodes    int    `json:"nodes"`
	Scenario string `json:"scenario"`
	// Workers is the worker count of a Scaling result; 0 for the others.
	Workers int `json:"workers,omitempty"`
	// Shards is, in the node-kind comparison (Clusters, ClustersFresh),
	// the masters of each cluster node; 0 for standalone servers and in
	// every other scenario.
	Shards int       `json:"shards,omitempty"`
	Median Figures   `json:"median"`
	Rounds []Figures `json:"rounds"`
}

// Settings are the parameters of a run, as the table headers and the JSON
// file show them.
type Settings struct {
	Rounds       int      `json:"rounds"`
	Duration     string   `json:"duration"`
	Warmup       string   `json:"warmup"`
	Grace        string   `json:"grace"`
	Workers      int      `json:"workers"`
	ManyWorkers  int      `json:"many_workers,omitempty"`
	Contenders   int      `json:"contenders"`
	Hold         string   `json:"hold"`
	SlowLatency  string   `json:"slow_latency"`
	FaultNode    int      `json:"fault_node"` // 0-based index of the slow or down node
	Nodes        []string `json:"nodes"`
	LocalServers bool     `json:"local_servers"` // started by the harness
	Quick        bool     `json:"quick"`
	// The scaling scenario's axes and window; empty when it did not run.
	ScaleWorkers  []int  `json:"scale_workers,omitempty"`
	ScaleNodes    []int  `json:"scale_nodes,omitempty"`
	ScaleDuration string `json:"scale_duration,omitempty"`
	// The node-kind comparison's quorum size and the shard counts of its
	// cluster nodes; empty when it did not run.
	ClusterNodes  int   `json:"cluster_nodes,omitempty"`
	ClusterShards []int `json:"cluster_shards,omitempty"`
}

// Env describes the machine, so numbers from different runs can be
// compared with care.
type Env struct {
	GoVersion   string `json:"go_version"`
	GOOS        string `json:"goos"`
	GOARCH      string `json:"goarch"`
	NumCPU      int    `json:"num_cpu"`
	GOMAXPROCS  int    `json:"gomaxprocs"`
	LoadBefore  string `json:"load_before,omitempty"` // /proc/loadavg at the start
	LoadAfter   string `json:"load_after,omitempty"`
	RedisServer string `json:"redis_server,omitempty"`
}

// Report is a whole run.
type Report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Command  string    `json:"command"`
	Settings Settings  `json:"settings"`
	Env      Env       `json:"environment"`
	Results  []Result  `json:"results"`
	Ratios   []Ratio   `json:"ratios"`
}

// Find returns the result of impl over nodes in scenario, or nil. For
// Scaling, which has a result per worker count, use FindScaled.
func (r *Report) Find(impl string, nodes int, scenario string) *Result {
	for i := range r.Results {
		x := &r.Results[i]
		if x.Impl == impl && x.Nodes == nodes && x.Scenario == scenario && x.Workers == 0 && x.Shards == 0 {
			return x
		}
	}
	return nil
}

// FindScaled returns the Scaling result of impl over nodes with workers
// workers, or nil.
func (r *Report) FindScaled(impl string, nodes, workers int) *Result {
	for i := range r.Results {
		x := &r.Results[i]
		if x.Impl == impl && x.Nodes == nodes && x.Scenario == Scaling && x.Workers == workers {
			return x
		}
	}
	return nil
}

// Median fills each result's Median from its Rounds: per metric, the median
// over the rounds that have it.
func (r *Report) Median() {
	for i := range r.Results {
		x := &r.Results[i]
		var keys []string
		for _, f := range x.Rounds {
			for k := range f {
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
		x.Median = make(Figures, len(keys))
		for _, k := range keys {
			var vs []float64
			for _, f := range x.Rounds {
				if v, ok := f[k]; ok {
					vs = append(vs, v)
				}
			}
			x.Median[k] = stats.Median(vs)
		}
	}
}

func nan() float64 { return math.NaN() }

// value returns a median figure, or NaN when it is missing.
func (r *Report) value(impl string, nodes int, scenario, metric string) float64 {
	x := r.Find(impl, nodes, scenario)
	if x == nil {
		return math.NaN()
	}
	v, ok := x.Median[metric]
	if !ok {
		return math.NaN()
	}
	return v
}

// WriteJSON writes the report, indented, to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Report{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ModeRow names one mode in a table.
type ModeRow struct {
	Impl  string
	Nodes int
}

// before is the p50 a fault scenario's figures are compared with: the same
// mode on the same path just before the fault (BaseP50), or, in a report
// that has none, the mode's uncontended p50.
func (r *Report) before(m ModeRow, scenario string) float64 {
	if r.Find(m.Impl, m.Nodes, scenario) == nil {
		return math.NaN()
	}
	if v := r.value(m.Impl, m.Nodes, scenario, BaseP50); !math.IsNaN(v) && v > 0 {
		return v
	}
	return r.value(m.Impl, m.Nodes, Uncontended, P50)
}

// modes lists the modes of the results, but for the scaling scenario's, in
// their first-seen order.
func (r *Report) modes() []ModeRow {
	var out []ModeRow
	for _, x := range r.Results {
		if x.Scenario == Scaling || IsClusters(x.Scenario) {
			continue
		}
		m := ModeRow{x.Impl, x.Nodes}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// WriteTable writes the medians as four aligned tables, one per kind of
// scenario, and the ratios.
func (r *Report) WriteTable(w io.Writer) error {
	s := r.Settings
	modes := r.modes()

	rounds := fmt.Sprintf("medians of %d rounds", s.Rounds)
	if s.Rounds == 1 {
		rounds = "one round"
	}
	lat := Table{
		Title:  fmt.Sprintf("Uncontended Obtain+Release, one goroutine, µs (%s); server = the servers' CPU per pair, all nodes", rounds),
		Header: []string{"impl", "nodes", "p50", "p90", "p99", "p99.9", "server µs", "errors"},
		Left:   1,
	}
	for _, m := range modes {
		if r.Find(m.Impl, m.Nodes, Uncontended) == nil {
			continue
		}
		v := func(k string) float64 { return r.value(m.Impl, m.Nodes, Uncontended, k) }
		lat.Rows = append(lat.Rows, []string{m.Impl, fmt.Sprint(m.Nodes),
			num(v(P50), 0), num(v(P90), 0), num(v(P99), 0), num(v(P999), 0), num(v(ServerCPU), 1), num(v(Errors), 0)})
	}

	tput := Table{
		Title:  fmt.Sprintf("Throughput: %d workers, each Obtain+Release on its own key", s.Workers),
		Header: []string{"impl", "nodes", "ops/s", "server µs", "errors"},
		Left:   1,
	}
	for _, m := range modes {
		if r.Find(m.Impl, m.Nodes, Throughput) == nil {
			continue
		}
		v := func(k string) float64 { return r.value(m.Impl, m.Nodes, Throughput, k) }
		tput.Rows = append(tput.Rows, []string{m.Impl, fmt.Sprint(m.Nodes), num(v(OpsPerSec), 0), num(v(ServerCPU), 1), num(v(Errors), 0)})
	}

	cont := Table{
		Title:  fmt.Sprintf("Contention: %d workers on one key, each holding it %s; wait = Obtain call to lock held", s.Contenders, s.Hold),
		Header: []string{"impl", "nodes", "acq/s", "wait p50 ms", "wait p99 ms", "gave up", "cut", "errors"},
		Left:   1,
	}
	for _, m := range modes {
		if r.Find(m.Impl, m.Nodes, Contention) == nil {
			if m.Impl == lockers.Floor && r.Find(m.Impl, m.Nodes, Uncontended) != nil {
				// The floor locks nothing: nothing to contend for.
				cont.Rows = append(cont.Rows, []string{m.Impl, fmt.Sprint(m.Nodes), "n/a", "n/a", "n/a", "n/a", "n/a", "n/a"})
			}
			continue
		}
		v := func(k string) float64 { return r.value(m.Impl, m.Nodes, Contention, k) }
		cont.Rows = append(cont.Rows, []string{m.Impl, fmt.Sprint(m.Nodes),
			num(v(AcqPerSec), 0), num(v(WaitP50), 1), num(v(WaitP99), 1), num(v(GaveUp), 0), num(v(Cut), 0), num(v(Errors), 0)})
	}

	faults := Table{
		Title: fmt.Sprintf("Node %d of the quorum slow (+%s per reply) or down: uncontended Obtain+Release, µs",
			s.FaultNode+1, s.SlowLatency),
		Header: []string{"impl", "nodes", "before p50", "slow p50", "slow p99", "slow/before",
			"before p50", "down p50", "down p99", "down/before", "down errors"},
		Left: 1,
	}
	for _, m := range modes {
		if r.Find(m.Impl, m.Nodes, SlowNode) == nil && r.Find(m.Impl, m.Nodes, NodeDown) == nil {
			continue
		}
		sl := func(k string) float64 { return r.value(m.Impl, m.Nodes, SlowNode, k) }
		dn := func(k string) float64 { return r.value(m.Impl, m.Nodes, NodeDown, k) }
		sb, db := r.before(m, SlowNode), r.before(m, NodeDown)
		faults.Rows = append(faults.Rows, []string{m.Impl, fmt.Sprint(m.Nodes),
			num(sb, 0), num(sl(P50), 0), num(sl(P99), 0), num(sl(P50)/sb, 2),
			num(db, 0), num(dn(P50), 0), num(dn(P99), 0), num(dn(P50)/db, 2), num(dn(Errors), 0)})
	}

	srv := Table{
		Title:  fmt.Sprintf("Server time per call and node, µs: %d workers obtain a key each, then release them all; cpu = the server's CPU (INFO cpu), script = the script's own (INFO commandstats)", s.Workers),
		Header: []string{"impl", "nodes", "acquire cpu", "acquire script", "release cpu", "release script", "errors"},
		Left:   1,
	}
	for _, m := range modes {
		if r.Find(m.Impl, m.Nodes, ServerTime) == nil {
			continue
		}
		v := func(k string) float64 { return r.value(m.Impl, m.Nodes, ServerTime, k) }
		srv.Rows = append(srv.Rows, []string{m.Impl, fmt.Sprint(m.Nodes),
			num(v(AcquireCPU), 2), num(v(AcquireScript), 2), num(v(ReleaseCPU), 2), num(v(ReleaseScript), 2), num(v(Errors), 0)})
	}

	fresh := Table{
		Title: fmt.Sprintf("Reused and fresh keys (a new key for every acquisition): uncontended p50 µs, throughput ops/s at %d and %d workers, server cpu µs per acquisition and node",
			s.Workers, s.ManyWorkers),
		Header: []string{"impl", "nodes", "p50 reused", "p50 fresh",
			fmt.Sprintf("ops/s %d reused", s.Workers), "fresh",
			fmt.Sprintf("ops/s %d reused", s.ManyWorkers), "fresh",
			"acquire cpu reused", "fresh", "errors fresh"},
		Left: 1,
	}
	for _, m := range modes {
		if r.Find(m.Impl, m.Nodes, UncontendedFresh) == nil && r.Find(m.Impl, m.Nodes, ThroughputFresh) == nil &&
			r.Find(m.Impl, m.Nodes, ThroughputManyFresh) == nil && r.Find(m.Impl, m.Nodes, ServerTimeFresh) == nil {
			continue
		}
		v := func(scenario, k string) float64 { return r.value(m.Impl, m.Nodes, scenario, k) }
		errs := 0.0
		for _, sc := range []string{UncontendedFresh, ThroughputFresh, ThroughputManyFresh, ServerTimeFresh} {
			if e := v(sc, Errors); !math.IsNaN(e) {
				errs += e
			}
		}
		fresh.Rows = append(fresh.Rows, []string{m.Impl, fmt.Sprint(m.Nodes),
			num(v(Uncontended, P50), 0), num(v(UncontendedFresh, P50), 0),
			num(v(Throughput, OpsPerSec), 0), num(v(ThroughputFresh, OpsPerSec), 0),
			num(v(ThroughputMany, OpsPerSec), 0), num(v(ThroughputManyFresh, OpsPerSec), 0),
			num(v(ServerTime, AcquireCPU), 2), num(v(ServerTimeFresh, AcquireCPU), 2), num(errs, 0)})
	}

	var b strings.Builder
	where := "given"
	if s.LocalServers {
		where = "local"
	}
	fmt.Fprintf(&b, "%d %s redis-server %s nodes; %s %s/%s, %d CPUs, GOMAXPROCS %d; load average %s before, %s after\n\n",
		len(s.Nodes), where, orDash(r.Env.RedisServer), r.Env.GoVersion, r.Env.GOOS, r.Env.GOARCH, r.Env.NumCPU, r.Env.GOMAXPROCS,
		orDash(r.Env.LoadBefore), orDash(r.Env.LoadAfter))
	for _, t := range append([]Table{lat, tput, cont, faults, srv, fresh, r.clustersTable()}, r.scalingTables()...) {
		if len(t.Rows) == 0 {
			continue
		}
		t.Write(&b)
		b.WriteByte('\n')
	}
	if len(r.Ratios) > 0 {
		b.WriteString("Ratios (of the medians above)\n")
		rt := Table{Left: 1}
		for _, x := range r.Ratios {
			rt.Rows = append(rt.Rows, []string{"  " + x.Name, num(x.Value, 2)})
		}
		rt.Write(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// num formats v with the given decimals, or "-" for a missing figure.
func num(v float64, decimals int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.*f", decimals, v)
}

// Table is a plain text table: the first Left columns are aligned left,
// the others right, as numbers read best.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Left   int
}

// Write writes the table, columns separated by two spaces, with a rule
// under the header. Widths count runes, so "µs" lines up.
func (t *Table) Write(b *strings.Builder) {
	var widths []int
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		for i, cell := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	line := func(row []string) {
		var l strings.Builder
		for i, cell := range row {
			if i > 0 {
				l.WriteString("  ")
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i < t.Left {
				l.WriteString(cell + pad)
			} else {
				l.WriteString(pad + cell)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	if t.Title != "" {
		b.WriteString(t.Title)
		b.WriteByte('\n')
	}
	if len(t.Header) > 0 {
		line(t.Header)
		total := 0
		for _, w := range widths {
			total += w
		}
		b.WriteString(strings.Repeat("-", total+2*(len(widths)-1)))
		b.WriteByte('\n')
	}
	for _, row := range t.Rows {
		line(row)
	}
}

// Ratio is a quotient of two medians that the project tracks.
type Ratio struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// ComputeRatios sets r.Ratios from the medians: the cost of the quorum
// over one node, ours against redsync under load and contention, and what
// a slow or dead node costs each quorum mode. Ratios whose figures are
// missing are left out.
func (r *Report) ComputeRatios() {
	const (
		ours = lockers.Redlock
		rs   = lockers.Redsync
		ff   = lockers.RedsyncFailFast
	)
	var out []Ratio
	add := func(name string, num, den float64) {
		if v := num / den; !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, Ratio{name, v})
		}
	}
	p50 := func(impl string, n int, scenario string) float64 { return r.value(impl, n, scenario, P50) }
	floor := lockers.Floor
	// How far from what the servers allow, and from the single-node peers.
	add("uncontended p50, redlock / floor (nodes=1)", p50(ours, 1, Uncontended), p50(floor, 1, Uncontended))
	add("uncontended p50, redlock / floor (nodes=5)", p50(ours, 5, Uncontended), p50(floor, 5, Uncontended))
	for _, peer := range []string{lockers.Redislock, lockers.Rueidislock} {
		add("uncontended p50, redlock / "+peer+" (nodes=1)", p50(ours, 1, Uncontended), p50(peer, 1, Uncontended))
	}
	for _, peer := range []string{floor, lockers.Redislock, lockers.Rueidislock} {
		add("throughput ops/s, redlock / "+peer+" (nodes=1)",
			r.value(ours, 1, Throughput, OpsPerSec), r.value(peer, 1, Throughput, OpsPerSec))
	}
	add("throughput ops/s, redlock / floor (nodes=5)", r.value(ours, 5, Throughput, OpsPerSec), r.value(floor, 5, Throughput, OpsPerSec))
	add("uncontended p50, redlock nodes=5 / nodes=1", p50(ours, 5, Uncontended), p50(ours, 1, Uncontended))
	add("uncontended p50, redlock nodes=3 / nodes=1", p50(ours, 3, Uncontended), p50(ours, 1, Uncontended))
	add("uncontended p50, redlock nodes=5 / redsync nodes=5", p50(ours, 5, Uncontended), p50(rs, 5, Uncontended))
	for _, peer := range []string{rs, ff} {
		add("throughput ops/s, redlock / "+peer+" (nodes=5)",
			r.value(ours, 5, Throughput, OpsPerSec), r.value(peer, 5, Throughput, OpsPerSec))
	}
	for _, peer := range []string{rs, ff} {
		add("contended wait p99, redlock / "+peer+" (nodes=5)",
			r.value(ours, 5, Contention, WaitP99), r.value(peer, 5, Contention, WaitP99))
		add("contended acquisitions/s, redlock / "+peer+" (nodes=5)",
			r.value(ours, 5, Contention, AcqPerSec), r.value(peer, 5, Contention, AcqPerSec))
	}
	for _, feature := range []string{lockers.RedlockFencing, lockers.RedlockGuard} {
		add("uncontended p50, "+feature+" / redlock (nodes=5)", p50(feature, 5, Uncontended), p50(ours, 5, Uncontended))
		add("throughput ops/s, "+feature+" / redlock (nodes=5)",
			r.value(feature, 5, Throughput, OpsPerSec), r.value(ours, 5, Throughput, OpsPerSec))
		add("server cpu per acquisition, "+feature+" / redlock (nodes=5)",
			r.value(feature, 5, ServerTime, AcquireCPU), r.value(ours, 5, ServerTime, AcquireCPU))
	}
	// The same on fresh keys, and at many workers on both workloads.
	for _, feature := range []string{lockers.RedlockFencing, lockers.RedlockGuard} {
		add("uncontended p50, "+feature+" / redlock (nodes=5, fresh keys)", p50(feature, 5, UncontendedFresh), p50(ours, 5, UncontendedFresh))
		add("throughput ops/s, "+feature+" / redlock (nodes=5, fresh keys)",
			r.value(feature, 5, ThroughputFresh, OpsPerSec), r.value(ours, 5, ThroughputFresh, OpsPerSec))
		add(fmt.Sprintf("throughput ops/s at %d workers, %s / redlock (nodes=5)", r.Settings.ManyWorkers, feature),
			r.value(feature, 5, ThroughputMany, OpsPerSec), r.value(ours, 5, ThroughputMany, OpsPerSec))
		add(fmt.Sprintf("throughput ops/s at %d workers, %s / redlock (nodes=5, fresh keys)", r.Settings.ManyWorkers, feature),
			r.value(feature, 5, ThroughputManyFresh, OpsPerSec), r.value(ours, 5, ThroughputManyFresh, OpsPerSec))
		add("server cpu per acquisition, "+feature+" / redlock (nodes=5, fresh keys)",
			r.value(feature, 5, ServerTimeFresh, AcquireCPU), r.value(ours, 5, ServerTimeFresh, AcquireCPU))
	}
	// All slow-node ratios first, then all node-down ones; the scenario
	// names double as the ratio names' prefixes.
	for _, fault := range []string{SlowNode, NodeDown} {
		for _, m := range r.modes() {
			if m.Nodes < 2 {
				continue
			}
			add(fmt.Sprintf("%s p50 / p50 just before, %s nodes=%d", fault, m.Impl, m.Nodes),
				p50(m.Impl, m.Nodes, fault), r.before(m, fault))
		}
	}
	r.clustersRatios(add)
	r.Ratios = out
}
