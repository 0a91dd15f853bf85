package main

import (
	"encoding/json"
	"io"

	"github.com/quorumlock/redlock/redlock/doctor"
)

// reportJSON is the --json form of a report.
type reportJSON struct {
	Severity      doctor.Severity  `json:"severity"`
	ExitCode      int              `json:"exit_code"`
	Quorum        int              `json:"quorum"`
	ClockWindowMs int64            `json:"clock_window_ms"`
	GuardInUse    bool             `json:"guard_in_use"`
	Unreachable   []string         `json:"unreachable"`
	Nodes         []nodeReportJSON `json:"nodes"`
	Findings      []findingJSON    `json:"findings"`
}

// nodeReportJSON is a node, or a shard of one: a cluster's or Sentinel
// group's own entry holds its address, kind, error, slots, sentinels and
// shards, and each shard the facts of a standalone node.
type nodeReportJSON struct {
	Addr string      `json:"addr"`
	Kind doctor.Kind `json:"kind"`
	// Shards are the masters that cast a cluster's or group's vote.
	Shards      []nodeReportJSON `json:"shards,omitempty"`
	Error       string           `json:"error,omitempty"`
	LatencyUs   int64            `json:"latency_us"`
	MaxLatUs    int64            `json:"max_latency_us"`
	Version     string           `json:"version,omitempty"`
	RunID       string           `json:"run_id,omitempty"`
	Role        string           `json:"role,omitempty"`
	Replicas    int              `json:"replicas,omitempty"`
	Master      string           `json:"master,omitempty"`
	Cluster     bool             `json:"cluster,omitempty"`
	InfoError   string           `json:"info_error,omitempty"`
	AppendOnly  string           `json:"appendonly,omitempty"`
	AppendFsync string           `json:"appendfsync,omitempty"`
	Save        string           `json:"save,omitempty"`
	ConfigError string           `json:"config_error,omitempty"`
	// The memory figures are -1 when unknown.
	MaxMemory       int64  `json:"maxmemory"`
	UsedMemory      int64  `json:"used_memory"`
	EvictedKeys     int64  `json:"evicted_keys"`
	MaxMemoryPolicy string `json:"maxmemory_policy,omitempty"`
	ScriptsError    string `json:"scripts_error,omitempty"`
	// The clock's offset (server minus this machine) and its uncertainty
	// in microseconds; its rate in server seconds per second of this
	// machine's, 0 when not measured.
	ClockOffsetUs        int64     `json:"clock_offset_us"`
	ClockUncertaintyUs   int64     `json:"clock_uncertainty_us"`
	ClockRate            float64   `json:"clock_rate"`
	ClockRateUncertainty float64   `json:"clock_rate_uncertainty"`
	ClockError           string    `json:"clock_error,omitempty"`
	Guard                guardJSON `json:"guard"`
	GuardError           string    `json:"guard_error,omitempty"`
	// Slots is how many hash slots a cluster's masters serve, on its
	// entry, or the shard serves; cluster_state and
	// cluster-node-timeout are a cluster's shard's.
	Slots                int    `json:"slots,omitempty"`
	ClusterState         string `json:"cluster_state,omitempty"`
	ClusterNodeTimeoutMs int64  `json:"cluster_node_timeout_ms,omitempty"`
	ClusterError         string `json:"cluster_error,omitempty"`
	// A Sentinel group's master's min-replicas-to-write and
	// min-replicas-max-lag (in seconds); -1 when unknown or not read.
	MinReplicasToWrite int `json:"min_replicas_to_write"`
	MinReplicasMaxLag  int `json:"min_replicas_max_lag"`
	// Sentinels is what each sentinel of a group named as its master.
	Sentinels []sentinelJSON `json:"sentinels,omitempty"`
}

type sentinelJSON struct {
	Addr   string `json:"addr"`
	Master string `json:"master,omitempty"`
	Error  string `json:"error,omitempty"`
}

type guardJSON struct {
	Known           bool   `json:"known"`
	Marker          bool   `json:"marker"`
	Current         bool   `json:"current"`
	Stale           string `json:"stale,omitempty"`
	AbstainMs       int64  `json:"abstain_ms"`
	BootstrapNeeded bool   `json:"bootstrap_needed"`
}

type findingJSON struct {
	Check      string          `json:"check"`
	Node       string          `json:"node,omitempty"`
	Shard      string          `json:"shard,omitempty"`
	Severity   doctor.Severity `json:"severity"`
	Summary    string          `json:"summary"`
	Fix        string          `json:"fix,omitempty"`
	Unverified bool            `json:"unverified,omitempty"`
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return errMsg(err)
}

func writeReportJSON(w io.Writer, rep *doctor.Report, code int) error {
	out := reportJSON{
		Severity: rep.Severity(), ExitCode: code, Quorum: rep.Quorum, ClockWindowMs: rep.ClockWindow.Milliseconds(),
		GuardInUse: rep.GuardInUse, Unreachable: rep.Unreachable(),
	}
	if out.Unreachable == nil {
		out.Unreachable = []string{}
	}
	for i := range rep.Nodes {
		out.Nodes = append(out.Nodes, nodeReport(&rep.Nodes[i]))
	}
	for _, f := range rep.Findings {
		out.Findings = append(out.Findings, findingJSON{Check: f.Check, Node: f.Node, Shard: f.Shard, Severity: f.Severity,
			Summary: f.Summary, Fix: f.Fix, Unverified: f.Unverified})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// nodeReport is the --json form of a node, its shards included.
func nodeReport(n *doctor.Node) nodeReportJSON {
	g := n.Guard
	out := nodeReportJSON{
		Addr: n.Addr, Kind: n.Kind, Error: errString(n.Err), LatencyUs: n.Latency.Microseconds(), MaxLatUs: n.MaxLatency.Microseconds(),
		Version: n.Version, RunID: n.RunID, Role: n.Role, Replicas: n.Replicas, Master: n.MasterAddr, Cluster: n.Cluster,
		InfoError: errString(n.InfoErr), AppendOnly: n.AppendOnly, AppendFsync: n.AppendFsync, Save: n.Save,
		ConfigError: errString(n.ConfigErr), MaxMemory: n.MaxMemory, UsedMemory: n.UsedMemory, EvictedKeys: n.EvictedKeys,
		MaxMemoryPolicy: n.MaxMemoryPolicy, ScriptsError: errString(n.ScriptsErr),
		ClockOffsetUs: n.ClockOffset.Microseconds(), ClockUncertaintyUs: n.ClockUncertainty.Microseconds(),
		ClockRate: n.ClockRate, ClockRateUncertainty: n.ClockRateUncertainty, ClockError: errString(n.ClockErr),
		Guard: guardJSON{Known: g.Known, Marker: g.Marker, Current: g.Current, Stale: g.Stale,
			AbstainMs: g.Abstain.Milliseconds(), BootstrapNeeded: g.BootstrapNeeded},
		GuardError: errString(n.GuardErr),
		Slots:      n.Slots, ClusterState: n.ClusterState, ClusterNodeTimeoutMs: n.ClusterNodeTimeout.Milliseconds(),
		ClusterError: errString(n.ClusterErr), MinReplicasToWrite: n.MinReplicasToWrite, MinReplicasMaxLag: n.MinReplicasMaxLag,
	}
	for i := range n.Shards {
		out.Shards = append(out.Shards, nodeReport(&n.Shards[i]))
	}
	for _, a := range n.Sentinels {
		out.Sentinels = append(out.Sentinels, sentinelJSON{Addr: a.Addr, Master: a.Master, Error: errString(a.Err)})
	}
	return out
}
