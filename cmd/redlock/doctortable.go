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
