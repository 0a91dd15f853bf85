package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock/redlock/doctor"
)

// Exit codes of doctor besides exitOK, exitUsage and exitUnavailable.
const (
	exitWarnings = 1 // warnings only
	exitErrors   = 2 // at least one error
)

var _ = register(&command{
	name:     "doctor",
	synopsis: "[flags]",
	help: `Check that the nodes meet the assumptions Redlock's safety rests on, and say
what to fix. For every node: that it answers and how fast, its version,
that the library's scripts may run (ACL permissions included), that no two
addresses reach one server (run_id), that it is a master outside any Redis
Cluster, what a restart does to the locks it granted (appendonly,
appendfsync, save, and the restart guard), that its maxmemory-policy cannot
evict lock keys, its clock's offset and rate against this machine's and the
other servers' (over --clock-window; beyond what the drift factor covers
for --ttl is a warning), and the restart guard's marker and quarantine. For
the whole set: the number of nodes, and whether enough of them can vote.

The table shows one row per node, a cell marked ! for a warning and !! for
an error; each problem follows, with its fix. Where the server refuses a
command (CONFIG is often renamed on managed services) the finding says what
could not be verified. Give --restart-guard when the locks use it, so that
a fresh cluster is told it needs "redlock bootstrap"; nodes that have the
guard's markers are checked for it anyway.
`,
	exits: []exitDoc{
		{"0", "all is well"},
		{"1", "warnings only"},
		{"2", "errors"},
		exitDocUsage,
		exitDocNoInput,
		{"69", "some node could not be reached (the other findings are still\nshown)"},
		exitDocFailure,
		exitDocConfig,
	},
	define: func(fs *flagSet) action {
		f := &doctorFlags{}
		f.register(fs)
		fs.BoolVar(&f.json, "json", false, "print the report as one JSON object")
		fs.durationVar(&f.window, "clock-window", doctor.DefaultClockWindow, "how long to measure the servers' clock rates over; 0 measures\nthe offsets only")
		fs.durationVar(&f.ttl, "ttl", defaultTTL, "the TTL the locks use: the clocks may differ by its drift allowance")
		fs.durationVar(&f.restartGuard, "restart-guard", 0, "the restart guard's maximum TTL, when the locks use it")
		return func(a *app, fs *flagSet, args []string) int { return a.doctor(fs, f, args) }
	},
})

type doctorFlags struct {
	nodeFlags
	json         bool
	window       time.Duration
	ttl          time.Duration
	restartGuard time.Duration
}

func (a *app) doctor(fs *flagSet, f *doctorFlags, args []string) int {
	pos, code, ok := fs.parse(a, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) > 0:
		return a.usageError(fs.cmd, fmt.Sprintf("no arguments expected, got %s", strings.Join(quoteAll(pos), " ")))
	case f.window < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--clock-window %v must not be negative", f.window))
	case f.restartGuard < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--restart-guard %v must not be negative", f.restartGuard))
	}
	clients, closeAll, code, ok := a.clients(fs, &f.nodeFlags)
	if !ok {
		return code
	}
	defer closeAll()
	rep, err := doctor.Check(context.Background(), clients,
		doctor.WithTTL(f.ttl), doctor.WithNodeTimeout(f.nodeTimeout),
		doctor.WithRestartGuard(f.restartGuard), doctor.WithClockWindow(f.window))
	if err != nil {
		return a.fail(fs.cmd, "check", err)
	}
	code = doctorCode(rep)
	if f.json {
		err = writeReportJSON(a.stdout, rep, code)
	} else {
		err = writeReport(a.stdout, rep)
	}
	if err != nil {
		a.errorf(fs.cmd, "writing the report: %v", err)
		return exitFailure
	}
	return code
}

// doctorCode is doctor's exit code for a report.
func doctorCode(rep *doctor.Report) int {
	if len(rep.Unreachable()) > 0 {
		return exitUnavailable
	}
	switch rep.Severity() {
	case doctor.Error:
		return exitErrors
	case doctor.Warning:
		return exitWarnings
	}
	return exitOK
}

// writeReport prints a report as a summary line, a table with one row per
// node, and the problems with their fixes.
func writeReport(w io.Writer, rep *doctor.Report) error {
	errs, warns := 0, 0
	for _, p := range rep.Problems() {
		if p.Severity == doctor.Error {
			errs++
		} else {
			warns++
		}
	}
	var counts []string
	if errs > 0 {
		counts = append(counts, plural(errs, "error"))
	}
	if warns > 0 {
		counts = append(counts, plural(warns, "warning"))
	}
	verdict := "all is well"
	if len(counts) > 0 {
		verdict = strings.Join(counts, ", ")
	}
	if _, err := fmt.Fprintf(w, "redlock doctor: %s, quorum %d, clock window %v: %s\n\n",
		plural(len(rep.Nodes), "node"), rep.Quorum, rep.ClockWindow, verdict); err != nil {
		return err
	}
	// The worst severity of each node's checks marks the table's cells.
	mark := map[[2]string]doctor.Severity{}
	for _, f := range rep.Findings {
		k := [2]string{f.Node, f.Check}
		mark[k] = max(mark[k], f.Severity)
	}
	cell := func(n *doctor.Node, check, text string) string {
		switch mark[[2]string{n.Addr, check}] {
		case doctor.Error:
			return text + " !!"
		case doctor.Warning:
			return text + " !"
		}
		return text
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tLATENCY\tVERSION\tSERVER\tROLE\tSCRIPTS\tPERSISTENCE\tMEMORY\tCLOCK\tGUARD")
	for i := range rep.Nodes {
		n := &rep.Nodes[i]
		if n.Err != nil {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\n", n.Addr, cell(n, doctor.Reach, "unreachable"))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Addr,
			cell(n, doctor.Reach, roundDur(n.Latency).String()),
			cell(n, doctor.Version, dash(n.Version)),
			cell(n, doctor.Identity, dash(prefix(n.RunID, 8))),
			cell(n, doctor.Role, roleCell(n)),
			cell(n, doctor.Scripts, okOr(n.ScriptsErr == nil, "refused")),
			cell(n, doctor.Persistence, persistenceCell(n)),
			cell(n, doctor.Memory, memoryCell(n)),
			cell(n, doctor.Clock, clockCell(n)),
			cell(n, doctor.Guard, guardCell(n, rep.GuardInUse)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	problems := rep.Problems()
	if len(problems) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range problems {
		node := p.Node
		if node == "" {
			node = "(all nodes)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", strings.ToUpper(p.Severity.String()), node, p.Check, p.Summary)
		if p.Fix != "" {
			fmt.Fprintf(tw, "\t\t\tfix: %s\n", p.Fix)
		}
	}
	return tw.Flush()
}

func roleCell(n *doctor.Node) string {
	switch {
	case n.Role == "":
		return "?"
	case n.Cluster:
		return "cluster"
	case n.Role == "slave":
		return "replica"
	case n.Replicas > 0:
		return fmt.Sprintf("master+%d", n.Replicas)
	}
	return n.Role
}

func persistenceCell(n *doctor.Node) string {
	switch {
	case n.AppendOnly == "yes" && n.AppendFsync != "":
		return "aof " + n.AppendFsync
	case n.AppendOnly == "yes":
		return "aof ?"
	case n.AppendOnly == "no" && n.Save != "":
		return "rdb"
	case n.AppendOnly == "no" && n.ConfigErr == nil:
		return "none"
	case n.AppendOnly == "no":
		return "no aof"
	}
	return "?"
}

func memoryCell(n *doctor.Node) string {
	if n.MaxMemoryPolicy == "" {
		return "?"
	}
	if n.MaxMemory > 0 {
		return fmt.Sprintf("%s %.0f%%", n.MaxMemoryPolicy, 100*float64(n.UsedMemory)/float64(n.MaxMemory))
	}
	return n.MaxMemoryPolicy
}

func clockCell(n *doctor.Node) string {
	if n.ClockErr != nil {
		return "?"
	}
	s := signedDur(n.ClockOffset)
	if n.ClockRate > 0 {
		// Rounded first: a rate that rounds to zero shows as +0.00%.
		pct := math.Round(10000*(n.ClockRate-1)) / 100
		s += fmt.Sprintf(" %+.2f%%", pct+0) // +0 turns -0 into 0
	}
	return s
}

func guardCell(n *doctor.Node, inUse bool) string {
	g := n.Guard
	switch {
	case !g.Known:
		return "?"
	case g.Abstain > 0:
		return "abstains " + g.Abstain.Round(100*time.Millisecond).String()
	case g.Marker && !g.Current:
		return "stale"
	case g.Marker:
		return "ok"
	case g.BootstrapNeeded:
		return "bootstrap"
	case inUse:
		return "no marker"
	}
	return "off"
}

// roundDur rounds a duration for the table.
func roundDur(d time.Duration) time.Duration {
	switch a := max(d, -d); {
	case a < time.Millisecond:
		return d.Round(time.Microsecond)
	case a < time.Second:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

func signedDur(d time.Duration) string {
	if r := roundDur(d); r >= 0 {
		return "+" + r.String()
	}
	return roundDur(d).String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func prefix(s string, n int) string { return s[:min(n, len(s))] }

func okOr(ok bool, otherwise string) string {
	if ok {
		return "ok"
	}
	return otherwise
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

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

type nodeReportJSON struct {
	Addr        string `json:"addr"`
	Error       string `json:"error,omitempty"`
	LatencyUs   int64  `json:"latency_us"`
	MaxLatUs    int64  `json:"max_latency_us"`
	Version     string `json:"version,omitempty"`
	RunID       string `json:"run_id,omitempty"`
	Role        string `json:"role,omitempty"`
	Replicas    int    `json:"replicas,omitempty"`
	Master      string `json:"master,omitempty"`
	Cluster     bool   `json:"cluster,omitempty"`
	InfoError   string `json:"info_error,omitempty"`
	AppendOnly  string `json:"appendonly,omitempty"`
	AppendFsync string `json:"appendfsync,omitempty"`
	Save        string `json:"save,omitempty"`
	ConfigError string `json:"config_error,omitempty"`
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
	for _, n := range rep.Nodes {
		g := n.Guard
		out.Nodes = append(out.Nodes, nodeReportJSON{
			Addr: n.Addr, Error: errString(n.Err), LatencyUs: n.Latency.Microseconds(), MaxLatUs: n.MaxLatency.Microseconds(),
			Version: n.Version, RunID: n.RunID, Role: n.Role, Replicas: n.Replicas, Master: n.MasterAddr, Cluster: n.Cluster,
			InfoError: errString(n.InfoErr), AppendOnly: n.AppendOnly, AppendFsync: n.AppendFsync, Save: n.Save,
			ConfigError: errString(n.ConfigErr), MaxMemory: n.MaxMemory, UsedMemory: n.UsedMemory, EvictedKeys: n.EvictedKeys,
			MaxMemoryPolicy: n.MaxMemoryPolicy, ScriptsError: errString(n.ScriptsErr),
			ClockOffsetUs: n.ClockOffset.Microseconds(), ClockUncertaintyUs: n.ClockUncertainty.Microseconds(),
			ClockRate: n.ClockRate, ClockRateUncertainty: n.ClockRateUncertainty, ClockError: errString(n.ClockErr),
			Guard: guardJSON{Known: g.Known, Marker: g.Marker, Current: g.Current, Stale: g.Stale,
				AbstainMs: g.Abstain.Milliseconds(), BootstrapNeeded: g.BootstrapNeeded},
			GuardError: errString(n.GuardErr),
		})
	}
	for _, f := range rep.Findings {
		out.Findings = append(out.Findings, findingJSON{Check: f.Check, Node: f.Node, Severity: f.Severity,
			Summary: f.Summary, Fix: f.Fix, Unverified: f.Unverified})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
