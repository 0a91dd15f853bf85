package report

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WriteChart draws four panels to path, an .svg or .png file: uncontended
// latency percentiles per mode, throughput per mode, contended wait per
// mode, and p50 with a slow or dead node per quorum mode.
func (r *Report) WriteChart(path string) error {
	panels := [][]*plot.Plot{
		{r.latencyPlot(), r.throughputPlot()},
		{r.contentionPlot(), r.faultPlot()},
	}
	return writePanels(path, 8*vg.Inch, panels, "report: no data to chart")
}

// writePanels draws rows of plots, 11 inches wide and h high, to path, an
// .svg or .png file. A nil plot (no data) is drawn as an empty panel that
// says so; with no plot at all, the error is empty.
func writePanels(path string, h vg.Length, panels [][]*plot.Plot, empty string) error {
	const w = 11 * vg.Inch
	var c vg.CanvasWriterTo
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg":
		c = vgsvg.New(w, h)
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(144))}
	default:
		return fmt.Errorf("report: chart format %q: want .svg or .png", ext)
	}
	// A run of some scenarios only (-scenarios) leaves some panels
	// without data: they say so, and only a chart with none fails.
	drawn := 0
	for _, row := range panels {
		for j, p := range row {
			if p == nil {
				row[j] = notRun()
				continue
			}
			drawn++
		}
	}
	if drawn == 0 {
		return errors.New(empty)
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: len(panels[0]), PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 4, PadBottom: vg.Millimeter * 4, PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(panels, tiles, draw.New(c))
	for i, row := range panels {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// notRun is the panel of a scenario that did not run.
func notRun() *plot.Plot {
	p := newPlot("(scenario not run)", "")
	p.HideAxes()
	return p
}

// label is a mode's short name on an axis.
func label(m ModeRow) string {
	return fmt.Sprintf("%s/%d", strings.Replace(m.Impl, "-failfast", "-ff", 1), m.Nodes)
}

func newPlot(title, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	return p
}

// latencyPlot draws one line per mode through its p50, p90, p99 and p99.9,
// on a log scale: the tails are an order of magnitude above the medians.
func (r *Report) latencyPlot() *plot.Plot {
	p := newPlot("Uncontended Obtain+Release latency", "µs (log scale)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	metrics := []string{P50, P90, P99, P999}
	n := 0
	for i, m := range r.modes() {
		var pts plotter.XYs
		for x, k := range metrics {
			if v := r.value(m.Impl, m.Nodes, Uncontended, k); v > 0 {
				pts = append(pts, plotter.XY{X: float64(x), Y: v})
			}
		}
		if addLine(p, pts, i, label(m)) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	p.NominalX("p50", "p90", "p99", "p99.9")
	decades(p)
	return p
}

// bars draws one bar per mode that has the metric in the scenario, in the
// mode's colour from the latency panel.
func (r *Report) bars(title, ylabel, scenario, metric string) *plot.Plot {
	p := newPlot(title, ylabel)
	p.Y.Tick.Marker = plainTicks{}
	var names []string
	for i, m := range r.modes() {
		v := r.value(m.Impl, m.Nodes, scenario, metric)
		if math.IsNaN(v) {
			continue
		}
		b, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(28))
		if err != nil {
			return nil
		}
		b.XMin = float64(len(names))
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		p.Add(b)
		names = append(names, label(m))
	}
	if len(names) == 0 {
		return nil
	}
	p.NominalX(names...)
	// Slanted, so that long mode names do not run into each other.
	p.X.Tick.Label.Rotation = math.Pi / 5
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YCenter
	return p
}

func (r *Report) throughputPlot() *plot.Plot {
	return r.bars(fmt.Sprintf("Throughput, %d workers on distinct keys", r.Settings.Workers),
		"Obtain+Release per second", Throughput, OpsPerSec)
}

func (r *Report) contentionPlot() *plot.Plot {
	return r.bars(fmt.Sprintf("Contention, %d workers on one key: p99 wait", r.Settings.Contenders),
		"ms", Contention, WaitP99)
}

// faultPlot draws, for each quorum mode, a line through its p50 with all
// nodes well, with one slow node and with one node down, on a log scale:
// waiting for the slow node costs an order of magnitude.
func (r *Report) faultPlot() *plot.Plot {
	p := newPlot(fmt.Sprintf("Uncontended p50, node %d slow (+%s) or down", r.Settings.FaultNode+1, r.Settings.SlowLatency), "µs (log scale)")
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	scenarios := []string{Uncontended, SlowNode, NodeDown}
	n := 0
	for i, m := range r.modes() {
		if r.Find(m.Impl, m.Nodes, SlowNode) == nil && r.Find(m.Impl, m.Nodes, NodeDown) == nil {
			continue
		}
		var pts plotter.XYs
		for x, s := range scenarios {
			if v := r.value(m.Impl, m.Nodes, s, P50); v > 0 {
				pts = append(pts, plotter.XY{X: float64(x), Y: v})
			}
		}
		if addLine(p, pts, i, label(m)) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	p.NominalX("all well", "one slow", "one down")
	decades(p)
	return p
}

// addLine adds a line through pts, with points, in the colour and shape of
// mode number i, and names it in the legend. It adds nothing and reports
// false when pts is empty or the line cannot be made.
func addLine(p *plot.Plot, pts plotter.XYs, i int, name string) bool {
	if len(pts) == 0 {
		return false
	}
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return false
	}
	l.Color, s.Color, s.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return true
}

// decades widens a log-scale Y axis to whole powers of ten, so that it
// always has at least two labelled ticks.
func decades(p *plot.Plot) {
	if p.Y.Min > 0 && p.Y.Max > 0 {
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(p.Y.Min)))
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(p.Y.Max)))
	}
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("25000", not "25000.00").
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}
