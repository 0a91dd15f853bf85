package report_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/bench/internal/report"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTableAlignment(t *testing.T) {
	tab := report.Table{
		Title:  "Latency, µs",
		Header: []string{"impl", "nodes", "p50 µs"},
		Rows: [][]string{
			{"redlock", "1", "95"},
			{"redsync-failfast", "5", "1234"},
		},
		Left: 1,
	}
	var b strings.Builder
	tab.Write(&b)
	want := strings.Join([]string{
		"Latency, µs",
		"impl              nodes  p50 µs",
		"-------------------------------",
		"redlock               1      95",
		"redsync-failfast      5    1234",
		"",
	}, "\n")
	if got := b.String(); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

// sample is a report with two rounds of two modes, one of them missing the
// fault scenarios as single-node modes do.
func sample() *report.Report {
	r := &report.Report{Settings: report.Settings{Rounds: 2, Workers: 64, ManyWorkers: 1024, Contenders: 16, Hold: "1ms", SlowLatency: "2ms", FaultNode: 2}}
	add := func(impl string, nodes int, scenario string, rounds ...report.Figures) {
		r.Results = append(r.Results, report.Result{Impl: impl, Nodes: nodes, Scenario: scenario, Rounds: rounds})
	}
	lat := func(p50 float64) report.Figures {
		return report.Figures{report.P50: p50, report.P90: 2 * p50, report.P99: 4 * p50, report.P999: 8 * p50, report.Errors: 0}
	}
	add("redlock", 1, report.Uncontended, lat(100), lat(120))
	add("redlock", 5, report.Uncontended, lat(200), lat(300))
	add("redsync", 5, report.Uncontended, lat(250), lat(350))
	add("redlock", 5, report.Throughput, report.Figures{report.OpsPerSec: 5000}, report.Figures{report.OpsPerSec: 7000})
	add("redsync", 5, report.Throughput, report.Figures{report.OpsPerSec: 4000}, report.Figures{report.OpsPerSec: 4000})
	add("redlock", 5, report.Contention, report.Figures{report.WaitP99: 100, report.AcqPerSec: 500})
	add("redsync", 5, report.Contention, report.Figures{report.WaitP99: 400, report.AcqPerSec: 500})
	// The slow-node baseline is measured in the scenario itself; a report
	// without one (redsync here) falls back to the uncontended p50.
	withBase := func(f report.Figures, base float64) report.Figures { f[report.BaseP50] = base; return f }
	add("redlock", 5, report.SlowNode, withBase(lat(250), 200), withBase(lat(250), 240))
	add("redsync", 5, report.SlowNode, lat(4500), lat(4500))
	add("redlock", 5, report.NodeDown, lat(240))
	srv := func(acq, rel float64) report.Figures {
		return report.Figures{report.AcquireCPU: acq, report.AcquireScript: acq / 2, report.ReleaseCPU: rel, report.ReleaseScript: rel / 2, report.Errors: 0}
	}
	add("redlock", 5, report.ServerTime, srv(10, 12), srv(12, 14))
	add("redlock+fencing", 5, report.ServerTime, srv(16, 12), srv(18, 14))
	// The distinct-key workload, for redlock's modes.
	add("redlock", 5, report.UncontendedFresh, lat(210), lat(230))
	add("redlock+fencing", 5, report.UncontendedFresh, lat(440), lat(460))
	add("redlock", 5, report.ThroughputFresh, report.Figures{report.OpsPerSec: 4000})
	add("redlock+fencing", 5, report.ThroughputFresh, report.Figures{report.OpsPerSec: 3000})
	add("redlock", 5, report.ThroughputManyFresh, report.Figures{report.OpsPerSec: 8000})
	add("redlock+fencing", 5, report.ThroughputManyFresh, report.Figures{report.OpsPerSec: 6000})
	add("redlock", 5, report.ServerTimeFresh, srv(11, 12))
	add("redlock+fencing", 5, report.ServerTimeFresh, srv(22, 12))
	r.Median()
	r.ComputeRatios()
	return r
}

func TestMedianOverRounds(t *testing.T) {
	r := sample()
	if got := r.Find("redlock", 1, report.Uncontended).Median[report.P50]; got != 110 {
		t.Errorf("median p50 = %v, want 110", got)
	}
	if got := r.Find("redlock", 5, report.Throughput).Median[report.OpsPerSec]; got != 6000 {
		t.Errorf("median ops/s = %v, want 6000", got)
	}
}

func TestRatios(t *testing.T) {
	r := sample()
	got := map[string]float64{}
	for _, x := range r.Ratios {
		got[x.Name] = x.Value
	}
	want := map[string]float64{
		"uncontended p50, redlock nodes=5 / nodes=1":                                        250.0 / 110,
		"throughput ops/s, redlock / redsync (nodes=5)":                                     6000.0 / 4000,
		"contended wait p99, redlock / redsync (nodes=5)":                                   0.25,
		"slow-node p50 / p50 just before, redlock nodes=5":                                  250.0 / 220,
		"slow-node p50 / p50 just before, redsync nodes=5":                                  4500.0 / 300,
		"node-down p50 / p50 just before, redlock nodes=5":                                  240.0 / 250,
		"server cpu per acquisition, redlock+fencing / redlock (nodes=5)":                   17.0 / 11,
		"uncontended p50, redlock+fencing / redlock (nodes=5, fresh keys)":                  450.0 / 220,
		"throughput ops/s, redlock+fencing / redlock (nodes=5, fresh keys)":                 0.75,
		"throughput ops/s at 1024 workers, redlock+fencing / redlock (nodes=5, fresh keys)": 0.75,
		"server cpu per acquisition, redlock+fencing / redlock (nodes=5, fresh keys)":       2,
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || math.Abs(g-w) > 1e-9 {
			t.Errorf("ratio %q = %v (present %v), want %v", name, g, ok, w)
		}
	}
	// Ratios whose figures are missing are left out, not NaN.
	if _, ok := got["throughput ops/s, redlock / redsync-failfast (nodes=5)"]; ok {
		t.Error("ratio against a mode that did not run")
	}
	if _, ok := got["throughput ops/s at 1024 workers, redlock+fencing / redlock (nodes=5)"]; ok {
		t.Error("ratio of a scenario that did not run")
	}
}

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	if err := sample().WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Uncontended Obtain+Release, one goroutine, µs (medians of 2 rounds)",
		"redlock      1  110  220   440    880          -       0",
		"redsync      5  300  600  1200   2400          -       0",
		"redlock      5   6000          -       -",
		// Figures that were not measured are dashes.
		"redlock      5    500            -        100.0        -    -       -",
		"Node 3 of the quorum slow (+2ms per reply) or down",
		"redlock      5         220       250      1000         1.14         250       240       960         0.96            0",
		"redsync      5         300      4500     18000        15.00           -         -         -            -            -",
		"slow-node p50 / p50 just before, redsync nodes=5",
		"Server time per call and node, µs: 64 workers",
		"redlock+fencing      5        17.00            8.50        13.00            6.50       0",
		// Both workloads side by side.
		"Reused and fresh keys (a new key for every acquisition): uncontended p50 µs, throughput ops/s at 64 and 1024 workers",
		"redlock              5         250        220             6000   4000                  -   8000               11.00  11.00             0",
		"redlock+fencing      5           -        450                -   3000                  -   6000               17.00  22.00             0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The fault table leaves out modes without fault results, as the
	// single-node redlock is: no row of dashes for it.
	_, faults, ok := strings.Cut(out, "Node 3 of the quorum")
	if !ok {
		t.Fatalf("no fault table:\n%s", out)
	}
	faults, _, _ = strings.Cut(faults, "\n\n")
	if strings.Contains(faults, "\nredlock      1 ") {
		t.Errorf("fault table has a row for single-node redlock:\n%s", faults)
	}
}

func TestWriteJSONAndChart(t *testing.T) {
	r := sample()
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "bench.json")
	if err := r.WriteJSON(jsonPath); err != nil {
		t.Fatal(err)
	}
	back, err := report.ReadJSON(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != len(r.Results) || len(back.Results[0].Rounds) != 2 {
		t.Errorf("JSON round trip lost results: %+v", back.Results)
	}
	for _, name := range []string{"bench.svg", "bench.png"} {
		p := filepath.Join(dir, name)
		if err := r.WriteChart(p); err != nil {
			t.Fatalf("WriteChart(%s): %v", name, err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v, %v", name, fi, err)
		}
	}
	if err := r.WriteChart(filepath.Join(dir, "bench.gif")); err == nil {
		t.Error("WriteChart accepted a .gif")
	}
}

// A run of some scenarios only draws their panels and marks the others;
// a report with no results at all has no chart.
func TestWriteChartOfSomeScenarios(t *testing.T) {
	r := sample()
	r.Results = slices.DeleteFunc(r.Results, func(x report.Result) bool { return x.Scenario != report.Uncontended })
	if len(r.Results) == 0 {
		t.Fatal("the sample has no uncontended results")
	}
	p := filepath.Join(t.TempDir(), "bench.svg")
	if err := r.WriteChart(p); err != nil {
		t.Fatalf("WriteChart of uncontended results only: %v", err)
	}
	svg, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(svg), "scenario not run"); n != 3 {
		t.Errorf("chart marks %d panels as not run, want 3 (throughput, contention, faults)", n)
	}
	r.Results = nil
	if err := r.WriteChart(p); err == nil {
		t.Error("WriteChart of no results succeeded")
	}
}
