package report

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/quorumlock/redlock/bench/internal/lockers"
)

// WriteScalingChart draws the scaling scenario to path, an .svg or .png
// file: throughput against workers (log-log: the counts grow by 4×) and
// against nodes. It fails when the report has no scaling results.
func (r *Report) WriteScalingChart(path string) error {
	panels := [][]*plot.Plot{{r.workersPlot(), r.nodesPlot()}}
	return writePanels(path, 5.5*vg.Inch, panels, "report: no scaling data to chart")
}

// scaleColour is an implementation's colour index in both scaling panels,
// so that a library keeps its colour across them.
func scaleColour(impl string) int {
	for i, x := range lockers.ScalingByNodes() {
		if x == impl {
			return i
		}
	}
	return len(lockers.ScalingByNodes())
}

// workersPlot draws a line per mode through its throughput at each worker
// count. Both axes are logarithmic; dashed lines are the floors.
func (r *Report) workersPlot() *plot.Plot {
	p := newPlot("Throughput by workers, each on its own key", "Obtain+Release per second (log scale)")
	p.X.Label.Text = "workers (log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = workerTicks(r.Settings.ScaleWorkers)
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	n := 0
	for _, m := range r.byWorkers() {
		var pts plotter.XYs
		for _, w := range r.Settings.ScaleWorkers {
			if v := r.scaled(m.Impl, m.Nodes, w); v > 0 {
				pts = append(pts, plotter.XY{X: float64(w), Y: v})
			}
		}
		// Shapes tell the node counts apart, colours the libraries.
		if addScaleLine(p, pts, scaleColour(m.Impl), m.Nodes, m.Impl == lockers.Floor, fmt.Sprintf("%s/%d", m.Impl, m.Nodes)) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	decades(p)
	// Two decades more at the bottom, for the legend to sit below the
	// lines.
	p.Y.Min /= 100
	p.Legend.Top = false
	p.Legend.Left = false
	return p
}

// nodesPlot draws a line per implementation through its throughput at
// each node count, at the run's worker count; a single-node library is a
// lone point at one node.
func (r *Report) nodesPlot() *plot.Plot {
	p := newPlot(fmt.Sprintf("Throughput by nodes, %d workers", r.Settings.Workers), "Obtain+Release per second")
	p.X.Label.Text = "nodes"
	p.Y.Tick.Marker = plainTicks{}
	p.X.Tick.Marker = workerTicks(r.Settings.ScaleNodes)
	p.Legend.Left = false
	n := 0
	for _, impl := range r.byNodes() {
		var pts plotter.XYs
		for _, nodes := range r.Settings.ScaleNodes {
			if v := r.scaled(impl, nodes, r.Settings.Workers); v > 0 {
				pts = append(pts, plotter.XY{X: float64(nodes), Y: v})
			}
		}
		if addScaleLine(p, pts, scaleColour(impl), 0, impl == lockers.Floor, impl) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	p.Y.Min = 0
	// Room on top for the legend, below the title.
	p.Y.Max *= 1.6
	p.Legend.YOffs = -vg.Millimeter * 8
	return p
}

// addScaleLine is addLine with the colour and shape chosen apart, and a
// dashed line for a floor.
func addScaleLine(p *plot.Plot, pts plotter.XYs, colour, shape int, dashed bool, name string) bool {
	if len(pts) == 0 {
		return false
	}
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return false
	}
	l.Color, s.Color = plotutil.Color(colour), plotutil.Color(colour)
	s.Shape = plotutil.Shape(shape)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return true
}

// workerTicks labels exactly the given values.
type workerTicks []int

func (t workerTicks) Ticks(_, _ float64) []plot.Tick {
	out := make([]plot.Tick, len(t))
	for i, v := range t {
		out[i] = plot.Tick{Value: float64(v), Label: fmt.Sprint(v)}
	}
	return out
}
