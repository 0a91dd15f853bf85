package harness

import (
	"fmt"
	"io"
	"slices"

	"github.com/quorumlock/redlock/bench/internal/lockers"
)

// scalePoint is one measurement of the scaling scenario: a mode's
// throughput with so many workers, each on its own key.
type scalePoint struct {
	mode    lockers.Mode
	workers int
}

// scalingPoints returns the scaling scenario's points: every mode of
// lockers.ScalingByWorkers at every cfg.ScaleWorkers, and every
// implementation of lockers.ScalingByNodes at every cfg.ScaleNodes it
// supports, at cfg.Workers; each point once, and only for implementations
// among cfg.Modes. Node counts above the nodes at hand are skipped, with a
// line on progress.
func scalingPoints(cfg *Config, nodes int, progress io.Writer) []scalePoint {
	chosen := func(impl string) bool {
		return slices.ContainsFunc(cfg.Modes, func(m lockers.Mode) bool { return m.Impl == impl })
	}
	var out []scalePoint
	add := func(p scalePoint) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, m := range lockers.ScalingByWorkers() {
		if !chosen(m.Impl) || m.Nodes > nodes {
			continue
		}
		for _, w := range cfg.ScaleWorkers {
			add(scalePoint{m, w})
		}
	}
	for _, n := range cfg.ScaleNodes {
		if n > nodes {
			fmt.Fprintf(progress, "scaling: skipping %d nodes, there are only %d\n", n, nodes)
			continue
		}
		for _, impl := range lockers.ScalingByNodes() {
			if chosen(impl) && lockers.Supports(impl, n) {
				add(scalePoint{lockers.Mode{Impl: impl, Nodes: n}, cfg.Workers})
			}
		}
	}
	return out
}
