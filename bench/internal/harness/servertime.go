package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/bench/internal/report"
)

// serverStats are what the servers have counted so far, the first nodes
// of Direct summed: their CPU time, the calls and time of the script
// commands (EVALSHA, EVAL, FCALL: every call redlock makes is one), and
// the time of INFO, the reading's own.
type serverStats struct {
	cpu, scriptCalls, scriptUsec, infoUsec float64
}

func (a serverStats) sub(b serverStats) serverStats {
	return serverStats{a.cpu - b.cpu, a.scriptCalls - b.scriptCalls, a.scriptUsec - b.scriptUsec, a.infoUsec - b.infoUsec}
}

func (a serverStats) add(b serverStats) serverStats {
	return serverStats{a.cpu + b.cpu, a.scriptCalls + b.scriptCalls, a.scriptUsec + b.scriptUsec, a.infoUsec + b.infoUsec}
}

// workCPU is the CPU time of a stretch between two readings less that of
// the readings' own INFO calls. The stretch from one reading of the CPU
// to the next holds the rest of the first reading (its INFO
// commandstats) and the start of the next; the INFO time that
// commandstats counts between the two readings is those same calls (a
// call's time is counted once it ends). Per node it is tens of µs,
// against some hundreds for a phase's 64 calls. Never below 0: the
// kernel may account a short stretch's CPU in coarser steps than INFO's
// own time.
func (a serverStats) workCPU() float64 { return max(0, a.cpu-a.infoUsec) }

// scriptCommands are the commands whose INFO commandstats time is a
// script's own, the commands it runs included.
var scriptCommands = []string{"evalsha", "eval", "fcall"}

// serverStats reads INFO cpu and INFO commandstats of the first n nodes
// of Direct.
func (c *Cluster) serverStats(ctx context.Context, n int) (serverStats, error) {
	var s serverStats
	for i, cl := range c.Direct[:n] {
		one, err := readServerStats(ctx, cl)
		if err != nil {
			return s, fmt.Errorf("node %d: %w", i+1, err)
		}
		s = s.add(one)
	}
	return s, nil
}

// readServerStats reads INFO cpu and INFO commandstats of the server that
// c reaches.
func readServerStats(ctx context.Context, c redis.UniversalClient) (serverStats, error) {
	var s serverStats
	cpu, err := nodeCPU(ctx, c)
	if err != nil {
		return s, err
	}
	s.cpu = cpu
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return s, fmt.Errorf("INFO commandstats: %w", err)
	}
	for _, cmd := range scriptCommands {
		calls, usec, err := commandStat(info, cmd)
		if err != nil {
			return s, fmt.Errorf("INFO commandstats: %w", err)
		}
		s.scriptCalls += calls
		s.scriptUsec += usec
	}
	if _, s.infoUsec, err = commandStat(info, "info"); err != nil {
		return s, fmt.Errorf("INFO commandstats: %w", err)
	}
	return s, nil
}

// commandStat returns cmd's calls and usec from an INFO commandstats
// reply; zeros for a command not run yet.
func commandStat(info, cmd string) (calls, usec float64, err error) {
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "calls":
				calls, err = strconv.ParseFloat(v, 64)
			case "usec":
				usec, err = strconv.ParseFloat(v, 64)
			}
			if err != nil {
				return 0, 0, fmt.Errorf("%s %s: %w", cmd, k, err)
			}
		}
	}
	return calls, usec, nil
}

// serverTime measures a mode's server time per acquisition and per
// release apart, which a pair's figure (ServerCPU) cannot tell: rounds of
// workers goroutines each obtaining a key of its own, then, once all hold,
// each releasing it, for d. The servers' counters are read between the
// phases, so each phase's figures are its own calls' alone (a mode's
// background work, a fence write-back, counts with the phase that caused
// it). Figures are per call and node: what one node spends on one
// acquisition bounds the rate of acquisitions a deployment can take.
// Fresh, each round takes new keys (the distinct-key workload); otherwise
// each worker's key is the same in every round.
func serverTime(ctx context.Context, cl *Cluster, impl lockers.Impl, nodes int, keyPrefix string, fresh bool, workers int, d time.Duration) (report.Figures, error) {
	ws := make([]lockers.Worker, workers)
	for i := range ws {
		ws[i] = impl.NewWorker()
	}
	// run runs f for every worker at once and returns its failures.
	run := func(f func(i int, w lockers.Worker) error) int {
		var wg sync.WaitGroup
		errs := make([]bool, workers)
		for i, w := range ws {
			wg.Go(func() { errs[i] = f(i, w) != nil })
		}
		wg.Wait()
		n := 0
		for _, e := range errs {
			if e {
				n++
			}
		}
		return n
	}
	var acq, rel serverStats
	var acquired, failed int
	uctx := context.WithoutCancel(ctx)
	start := time.Now()
	for round := 0; round == 0 || (time.Since(start) < d && ctx.Err() == nil); round++ {
		s0, err := cl.serverStats(ctx, nodes)
		if err != nil {
			return nil, err
		}
		held := make([]bool, workers)
		prefix := keyPrefix
		if fresh {
			prefix = fmt.Sprintf("%s:%d", keyPrefix, round)
		}
		failed += run(func(i int, w lockers.Worker) error {
			err := w.Lock(ctx, fmt.Sprintf("%s:%d", prefix, i), true)
			held[i] = err == nil
			return err
		})
		s1, err := cl.serverStats(ctx, nodes)
		if err != nil {
			return nil, err
		}
		failed += run(func(i int, w lockers.Worker) error {
			if !held[i] {
				return nil
			}
			return w.Unlock(uctx)
		})
		s2, err := cl.serverStats(ctx, nodes)
		if err != nil {
			return nil, err
		}
		for _, h := range held {
			if h {
				acquired++
			}
		}
		acq, rel = acq.add(s1.sub(s0)), rel.add(s2.sub(s1))
	}
	f := report.Figures{report.Ops: float64(acquired), report.Errors: float64(failed)}
	if acquired == 0 {
		return f, nil
	}
	per := float64(acquired) * float64(nodes)
	f[report.AcquireCPU], f[report.ReleaseCPU] = acq.workCPU()/per, rel.workCPU()/per
	f[report.AcquireScript], f[report.ReleaseScript] = acq.scriptUsec/per, rel.scriptUsec/per
	return f, nil
}
