package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock/redlock/doctor"
)

// writeReport prints a report as a summary line, a table with one row per
// node and an indented one per shard of a cluster or Sentinel group, and
// the problems with their fixes.
func writeReport(w io.Writer, rep *doctor.Report) error {
	if _, err := fmt.Fprintf(w, "redlock doctor: %s, quorum %d, clock window %v: %s\n\n",
		plural(len(rep.Nodes), "node"), rep.Quorum, rep.ClockWindow, verdict(rep)); err != nil {
		return err
	}
	if err := writeTable(w, rep); err != nil {
		return err
	}
	return writeProblems(w, rep.Problems())
}

// verdict counts the report's errors and warnings, or says all is well.
func verdict(rep *doctor.Report) string {
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
	if len(counts) == 0 {
		return "all is well"
	}
	return strings.Join(counts, ", ")
}

// marks holds the worst severity of the findings of each check at each
// place a finding names (Finding.Where: a node, or a shard of one).
type marks map[[2]string]doctor.Severity

func newMarks(findings []doctor.Finding) marks {
	m := marks{}
	for _, f := range findings {
		k := [2]string{f.Where(), f.Check}
		m[k] = max(m[k], f.Severity)
	}
	return m
}

// cell is text marked with the worst of the checks' findings at where:
// " !" for a warning, " !!" for an error.
func (m marks) cell(where, text string, checks ...string) string {
	worst := doctor.OK
	for _, c := range checks {
		worst = max(worst, m[[2]string{where, c}])
	}
	switch worst {
	case doctor.Error:
		return text + " !!"
	case doctor.Warning:
		return text + " !"
	}
	return text
}

// roleChecks mark the ROLE column: a server's role, and on a cluster or
// Sentinel group (or its master) what its slots, sentinels and failovers
// do to the locks.
var roleChecks = []string{doctor.Role, doctor.Failover, doctor.Slots, doctor.Sentinels}

func writeTable(w io.Writer, rep *doctor.Report) error {
	m := newMarks(rep.Findings)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tLATENCY\tVERSION\tSERVER\tROLE\tSCRIPTS\tPERSISTENCE\tMEMORY\tCLOCK\tGUARD")
	for i := range rep.Nodes {
		n := &rep.Nodes[i]
		if n.Kind == doctor.KindServer || n.Err != nil {
			fmt.Fprintln(tw, serverRow(m, n.Addr, n.Addr, n, rep.GuardInUse))
			continue
		}
		fmt.Fprintln(tw, n.Addr+"\t-\t-\t-\t"+m.cell(n.Addr, groupCell(n), roleChecks...)+"\t-\t-\t-\t-\t-")
		for j := range n.Shards {
			s := &n.Shards[j]
			where := doctor.Finding{Node: n.Addr, Shard: s.Addr}.Where()
			fmt.Fprintln(tw, serverRow(m, where, "  "+s.Addr, s, rep.GuardInUse))
		}
	}
	return tw.Flush()
}

// serverRow is the table's row of a server: a standalone node, or a shard
// of a cluster or group (named where by its findings); label is its NODE
// cell. A cluster or group whose masters could not be found has this row
// too, as unreachable.
func serverRow(m marks, where, label string, n *doctor.Node, guardInUse bool) string {
	if n.Err != nil {
		return label + "\t" + m.cell(where, "unreachable", doctor.Reach) + "\t-\t-\t-\t-\t-\t-\t-\t-"
	}
	return strings.Join([]string{label,
		m.cell(where, roundDur(n.Latency).String(), doctor.Reach),
		m.cell(where, dash(n.Version), doctor.Version),
		m.cell(where, dash(prefix(n.RunID, 8)), doctor.Identity),
		m.cell(where, roleCell(n), roleChecks...),
		m.cell(where, okOr(n.ScriptsErr == nil, "refused"), doctor.Scripts),
		m.cell(where, persistenceCell(n), doctor.Persistence),
		m.cell(where, memoryCell(n), doctor.Memory),
		m.cell(where, clockCell(n), doctor.Clock),
		m.cell(where, guardCell(n, guardInUse), doctor.Guard),
	}, "\t")
}

// writeProblems prints the findings that are not ok, each named by where
// it was found, with its fix.
func writeProblems(w io.Writer, problems []doctor.Finding) error {
	if len(problems) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range problems {
		where := p.Where()
		if where == "" {
			where = "(all nodes)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", strings.ToUpper(p.Severity.String()), where, p.Check, p.Summary)
		if p.Fix != "" {
			fmt.Fprintf(tw, "\t\t\tfix: %s\n", p.Fix)
		}
	}
	return tw.Flush()
}

// groupCell is the ROLE cell of a cluster (how many of its slots some
// master serves) or a Sentinel group (how many of its sentinels answer).
func groupCell(n *doctor.Node) string {
	if n.Kind == doctor.KindCluster {
		return fmt.Sprintf("%d slots", n.Slots)
	}
	answered := 0
	for _, a := range n.Sentinels {
		if a.Err == nil {
			answered++
		}
	}
	return fmt.Sprintf("%d/%d sentinels", answered, len(n.Sentinels))
}

func roleCell(n *doctor.Node) string {
	switch {
	case n.Role == "":
		return "?"
	case n.Cluster && n.Kind != doctor.KindCluster:
		// A cluster's master given as a standalone node.
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
	case g.StaleSlots > 0 && g.StaleSlots < g.Slots:
		return fmt.Sprintf("stale (%d slots)", g.StaleSlots)
	case g.Marker && !g.Current:
		return "stale"
	case g.Marker:
		return "ok"
	case g.BootstrapNeeded:
		return "bootstrap"
	case g.Unmarked > 0 && g.Unmarked < g.Slots:
		return fmt.Sprintf("no marker (%d slots)", g.Unmarked)
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
