package report_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/bench/internal/report"
)

// scaled is a report with the floor in the uncontended scenario and a
// small scaling scenario: two worker counts, and nodes 1 and 3 at 64.
func scaled() *report.Report {
	r := &report.Report{Settings: report.Settings{Rounds: 1, Workers: 64, Contenders: 16, Hold: "1ms",
		ScaleWorkers: []int{1, 64}, ScaleNodes: []int{1, 3}, ScaleDuration: "500ms"}}
	add := func(impl string, nodes, workers int, scenario string, f report.Figures) {
		r.Results = append(r.Results, report.Result{Impl: impl, Nodes: nodes, Scenario: scenario, Workers: workers, Rounds: []report.Figures{f}})
	}
	add(lockers.Floor, 1, 0, report.Uncontended, report.Figures{report.P50: 50})
	add(lockers.Redlock, 1, 0, report.Uncontended, report.Figures{report.P50: 100})
	add(lockers.Redlock, 1, 0, report.Contention, report.Figures{report.WaitP99: 10, report.AcqPerSec: 500})
	ops := func(v float64) report.Figures { return report.Figures{report.OpsPerSec: v} }
	add(lockers.Redlock, 1, 1, report.Scaling, ops(5000))
	add(lockers.Redlock, 1, 64, report.Scaling, ops(40000))
	add(lockers.Floor, 1, 1, report.Scaling, ops(9000))
	add(lockers.Floor, 1, 64, report.Scaling, ops(30000))
	add(lockers.Rueidislock, 1, 1, report.Scaling, ops(4000))
	add(lockers.Rueidislock, 1, 64, report.Scaling, ops(35000))
	add(lockers.Redlock, 3, 64, report.Scaling, ops(20000))
	add(lockers.Redsync, 3, 64, report.Scaling, ops(4000))
	add(lockers.Floor, 3, 64, report.Scaling, ops(15000))
	r.Median()
	r.ComputeRatios()
	return r
}

func TestScalingTables(t *testing.T) {
	r := scaled()
	if !r.HasScaling() || sample().HasScaling() {
		t.Fatal("HasScaling wrong")
	}
	// Scaling results stay out of Find, which serves the other tables.
	if r.Find(lockers.Redlock, 1, report.Scaling) != nil {
		t.Error("Find returned a scaling result")
	}
	if x := r.FindScaled(lockers.Redlock, 1, 64); x == nil || x.Median[report.OpsPerSec] != 40000 {
		t.Errorf("FindScaled = %+v", x)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		// The floor has nothing to contend for.
		"floor        1    n/a          n/a          n/a      n/a  n/a     n/a",
		"Scaling: Obtain+Release per second by workers, each on its own key (500ms windows;",
		"impl         nodes     1     64",
		"redlock          1  5000  40000",
		"floor            1  9000  30000",
		"Scaling: Obtain+Release per second by nodes, 64 workers",
		"impl         nodes=1  nodes=3",
		"redlock        40000    20000",
		// redsync wants several nodes, rueidislock is single-node here.
		"redsync          n/a     4000",
		"rueidislock    35000      n/a",
		"uncontended p50, redlock / floor (nodes=1)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Modes measured only on the node axis get no row by workers.
	byWorkers, _, _ := strings.Cut(out[strings.Index(out, "Scaling: Obtain+Release per second by workers"):], "\n\n")
	if strings.Contains(byWorkers, "\nredlock          3") || strings.Contains(byWorkers, "\nredsync") {
		t.Errorf("workers table has a node-axis-only row:\n%s", byWorkers)
	}
}

func TestWriteScalingChart(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"scaling.svg", "scaling.png"} {
		p := filepath.Join(dir, name)
		if err := scaled().WriteScalingChart(p); err != nil {
			t.Fatalf("WriteScalingChart(%s): %v", name, err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: %v, %v", name, fi, err)
		}
	}
	if err := sample().WriteScalingChart(filepath.Join(dir, "none.svg")); err == nil {
		t.Error("WriteScalingChart drew a report without scaling results")
	}
}
