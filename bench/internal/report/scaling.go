package report

import (
	"fmt"
	"math"
	"slices"

	"github.com/quorumlock/redlock/bench/internal/lockers"
)

// HasScaling reports whether the report has results of the scaling
// scenario.
func (r *Report) HasScaling() bool {
	return slices.ContainsFunc(r.Results, func(x Result) bool { return x.Scenario == Scaling })
}

// scaled returns the median throughput of impl over nodes with workers
// workers in the scaling scenario, or NaN.
func (r *Report) scaled(impl string, nodes, workers int) float64 {
	x := r.FindScaled(impl, nodes, workers)
	if x == nil {
		return math.NaN()
	}
	v, ok := x.Median[OpsPerSec]
	if !ok {
		return math.NaN()
	}
	return v
}

// scaledCell is a scaling table's cell: the median throughput and, when
// calls failed, the median count of failures, which a collapse under load
// shows as.
func (r *Report) scaledCell(impl string, nodes, workers int) string {
	cell := num(r.scaled(impl, nodes, workers), 0)
	if x := r.FindScaled(impl, nodes, workers); x != nil && x.Median[Errors] > 0 {
		cell += fmt.Sprintf(" (%s err)", num(x.Median[Errors], 0))
	}
	return cell
}

// byWorkers lists the modes of lockers.ScalingByWorkers that have a
// scaling result at every worker count of the run but one at most (so
// that a mode measured only on the node axis is not drawn as a flat dot).
func (r *Report) byWorkers() []lockers.Mode {
	var out []lockers.Mode
	for _, m := range lockers.ScalingByWorkers() {
		n := 0
		for _, w := range r.Settings.ScaleWorkers {
			if r.FindScaled(m.Impl, m.Nodes, w) != nil {
				n++
			}
		}
		if n > 0 && n >= len(r.Settings.ScaleWorkers)-1 {
			out = append(out, m)
		}
	}
	return out
}

// byNodes lists the implementations of lockers.ScalingByNodes with a
// scaling result at the run's worker count on some node count.
func (r *Report) byNodes() []string {
	var out []string
	for _, impl := range lockers.ScalingByNodes() {
		for _, n := range r.Settings.ScaleNodes {
			if r.FindScaled(impl, n, r.Settings.Workers) != nil {
				out = append(out, impl)
				break
			}
		}
	}
	return out
}

// scalingTables are the scaling scenario's two tables: throughput by
// workers (a row per mode), and by nodes (a row per implementation).
func (r *Report) scalingTables() []Table {
	s := r.Settings
	if !r.HasScaling() {
		return nil
	}
	byW := Table{
		Title: fmt.Sprintf("Scaling: Obtain+Release per second by workers, each on its own key (%s windows; err: failed calls, median)",
			s.ScaleDuration),
		Header: []string{"impl", "nodes"},
		Left:   1,
	}
	for _, w := range s.ScaleWorkers {
		byW.Header = append(byW.Header, fmt.Sprint(w))
	}
	for _, m := range r.byWorkers() {
		row := []string{m.Impl, fmt.Sprint(m.Nodes)}
		for _, w := range s.ScaleWorkers {
			row = append(row, r.scaledCell(m.Impl, m.Nodes, w))
		}
		byW.Rows = append(byW.Rows, row)
	}

	byN := Table{
		Title:  fmt.Sprintf("Scaling: Obtain+Release per second by nodes, %d workers (n/a: the library is single-node or wants several)", s.Workers),
		Header: []string{"impl"},
		Left:   1,
	}
	for _, n := range s.ScaleNodes {
		byN.Header = append(byN.Header, fmt.Sprintf("nodes=%d", n))
	}
	for _, impl := range r.byNodes() {
		row := []string{impl}
		for _, n := range s.ScaleNodes {
			cell := r.scaledCell(impl, n, s.Workers)
			if !lockers.Supports(impl, n) {
				cell = "n/a"
			}
			row = append(row, cell)
		}
		byN.Rows = append(byN.Rows, row)
	}
	var out []Table
	for _, t := range []Table{byW, byN} {
		if len(t.Rows) > 0 {
			out = append(out, t)
		}
	}
	return out
}
