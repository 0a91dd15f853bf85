package report_test

import (
	"math"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/bench/internal/report"
)

// kinds is a report of the node-kind comparison alone: standalone
// servers and clusters of 2 shards, two rounds of reused keys, one of
// fresh keys.
func kinds() *report.Report {
	r := &report.Report{Settings: report.Settings{Rounds: 2, Workers: 64, ClusterNodes: 3, ClusterShards: []int{2}}}
	fig := func(ops, server, client float64) report.Figures {
		return report.Figures{report.OpsPerSec: ops, report.P50: 3000, report.P99: 9000, report.P999: 12000,
			report.NodeServerCPU: server, report.NodeScript: server / 2, report.ShardSkew: 1.1, report.ClientCPU: client}
	}
	add := func(scenario string, shards int, rounds ...report.Figures) {
		r.Results = append(r.Results, report.Result{Impl: "redlock", Nodes: 3, Scenario: scenario, Shards: shards, Rounds: rounds})
	}
	add(report.Clusters, 0, fig(10000, 16, 40), fig(12000, 18, 44))
	add(report.Clusters, 2, fig(8000, 20, 60), fig(8000, 20, 60))
	add(report.ClustersFresh, 0, fig(9000, 17, 45))
	add(report.ClustersFresh, 2, fig(6000, 25, 50))
	r.Median()
	r.ComputeRatios()
	return r
}

func TestClustersTable(t *testing.T) {
	r := kinds()
	if got := r.FindKind(report.Clusters, 0).Median[report.OpsPerSec]; got != 11000 {
		t.Errorf("median pairs/s of the servers = %v, want 11000", got)
	}
	var b strings.Builder
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Node kinds: 3 nodes, standalone servers or Redis Clusters of so many shards; 64 workers",
		// Per core: 1e6 / 17 µs and 1e6 / 42 µs.
		"server   -       reused    11000  3000  9000  12000                17.0     8.5  1.10       42.0                   58824            23810       -",
		"cluster  2       fresh      6000  3000  9000  12000                25.0    12.5  1.10       50.0                   40000            20000       -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Its results are no modes of the other tables.
	if strings.Contains(out, "Uncontended Obtain+Release") || strings.Contains(out, "Throughput: ") {
		t.Errorf("the node-kind results appear in the other tables:\n%s", out)
	}
	got := map[string]float64{}
	for _, x := range r.Ratios {
		got[x.Name] = x.Value
	}
	for name, want := range map[string]float64{
		"throughput ops/s, clusters of 2 shards / servers (nodes=3, reused keys)":            8000.0 / 11000,
		"server cpu per pair and node, clusters of 2 shards / servers (nodes=3, fresh keys)": 25.0 / 17,
	} {
		if g, ok := got[name]; !ok || math.Abs(g-want) > 1e-9 {
			t.Errorf("ratio %q = %v (present %v), want %v", name, g, ok, want)
		}
	}
	if len(got) != 4 {
		t.Errorf("ratios %v, want 4", got)
	}
}
