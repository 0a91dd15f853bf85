package report

import (
	"fmt"
	"slices"
)

// The node-kind comparison: plain redlock over a quorum of standalone
// servers and over quorums of Redis Clusters of so many shards (masters)
// each, side by side, workers on keys of their own (Clusters) or on a new
// key for every acquisition (ClustersFresh). Their results carry the
// shard count (Result.Shards; 0 for standalone servers).
const (
	Clusters      = "clusters"
	ClustersFresh = "clusters-fresh"
)

// Metrics of the node-kind comparison, per Obtain+Release pair, in µs.
const (
	// NodeServerCPU is the servers' CPU time (INFO cpu, less the readings'
	// own INFO time) per pair and quorum node, a node's shards summed:
	// what the shard that owns the pair's key spends on it.
	NodeServerCPU = "server_cpu_per_node_us"
	// NodeScript is the part of NodeServerCPU in the script calls (INFO
	// commandstats).
	NodeScript = "script_per_node_us"
	// ShardSkew is the busiest server's CPU time over the mean of all the
	// quorum's servers: 1 when the pairs spread evenly over the shards.
	ShardSkew = "shard_skew"
	// ClientCPU is the benchmark process's CPU time (user and system)
	// per pair: the lock client's cost, which no shard count divides.
	ClientCPU = "client_cpu_us"
)

// IsClusters reports whether scenario is one of the node-kind
// comparison's, which run only when asked for by name.
func IsClusters(scenario string) bool { return scenario == Clusters || scenario == ClustersFresh }

// FindKind returns the node-kind comparison's result of scenario over
// clusters of shards shards (0: standalone servers), or nil.
func (r *Report) FindKind(scenario string, shards int) *Result {
	for i := range r.Results {
		x := &r.Results[i]
		if x.Scenario == scenario && x.Shards == shards {
			return x
		}
	}
	return nil
}

// kindShards lists the shard counts of the node-kind results, 0 (the
// standalone servers) first, then ascending.
func (r *Report) kindShards() []int {
	var out []int
	for _, x := range r.Results {
		if IsClusters(x.Scenario) && !slices.Contains(out, x.Shards) {
			out = append(out, x.Shards)
		}
	}
	slices.Sort(out)
	return out
}

// kindValue returns a median figure of the node-kind comparison, or NaN.
func (r *Report) kindValue(scenario string, shards int, metric string) float64 {
	x := r.FindKind(scenario, shards)
	if x == nil {
		return nan()
	}
	if v, ok := x.Median[metric]; ok {
		return v
	}
	return nan()
}

// clustersTable is the node-kind comparison's table: a row per node kind
// and workload, with the measured figures and, last, the rates one core
// gives at those figures (1,000,000 µs over the figure).
func (r *Report) clustersTable() Table {
	t := Table{
		Title: fmt.Sprintf("Node kinds: %d nodes, standalone servers or Redis Clusters of so many shards; %d workers, reused keys (a key each) or fresh (a new key each time); µs per Obtain+Release pair; per core = 1e6 / µs",
			r.Settings.ClusterNodes, r.Settings.Workers),
		Header: []string{"node", "shards", "keys", "pairs/s", "p50", "p99", "p99.9", "server µs per node", "script", "skew",
			"client µs", "pairs/s per shard core", "per client core", "errors"},
		Left: 3,
	}
	for _, sc := range []string{Clusters, ClustersFresh} {
		for _, s := range r.kindShards() {
			if r.FindKind(sc, s) == nil {
				continue
			}
			v := func(k string) float64 { return r.kindValue(sc, s, k) }
			node, shards, keys := "cluster", fmt.Sprint(s), "reused"
			if s == 0 {
				node, shards = "server", "-"
			}
			if sc == ClustersFresh {
				keys = "fresh"
			}
			t.Rows = append(t.Rows, []string{node, shards, keys, num(v(OpsPerSec), 0), num(v(P50), 0), num(v(P99), 0), num(v(P999), 0),
				num(v(NodeServerCPU), 1), num(v(NodeScript), 1), num(v(ShardSkew), 2), num(v(ClientCPU), 1),
				num(1e6/v(NodeServerCPU), 0), num(1e6/v(ClientCPU), 0), num(v(Errors), 0)})
		}
	}
	return t
}

// clustersRatios are the node-kind comparison's ratios: each cluster
// shard count against the standalone servers, on both workloads.
func (r *Report) clustersRatios(add func(name string, num, den float64)) {
	n := r.Settings.ClusterNodes
	for _, sc := range []string{Clusters, ClustersFresh} {
		keys := "reused keys"
		if sc == ClustersFresh {
			keys = "fresh keys"
		}
		for _, s := range r.kindShards() {
			if s == 0 {
				continue
			}
			add(fmt.Sprintf("throughput ops/s, clusters of %d shards / servers (nodes=%d, %s)", s, n, keys),
				r.kindValue(sc, s, OpsPerSec), r.kindValue(sc, 0, OpsPerSec))
			add(fmt.Sprintf("server cpu per pair and node, clusters of %d shards / servers (nodes=%d, %s)", s, n, keys),
				r.kindValue(sc, s, NodeServerCPU), r.kindValue(sc, 0, NodeServerCPU))
		}
	}
}
