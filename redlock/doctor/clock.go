package doctor

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/clock"
)

// clockSample is one reading of a server's clock: the server's time, this
// machine's time half-way through the round trip (with its monotonic
// reading), and the round trip.
type clockSample struct {
	server, mid time.Time
	rtt         time.Duration
}

// readClock reads the server's clock a few times and keeps the reading
// with the shortest round trip, the most precise.
func readClock(ctx context.Context, c *redis.Client, timeout time.Duration) (clockSample, error) {
	var best clockSample
	for i := range clockRuns {
		var t time.Time
		start := time.Now()
		err := checkCall(ctx, timeout, func(ctx context.Context) error {
			var err error
			t, err = c.Time(ctx).Result()
			return err
		})
		rtt := time.Since(start)
		if err != nil {
			return clockSample{}, fmt.Errorf("TIME: %w", err)
		}
		if i == 0 || rtt < best.rtt {
			best = clockSample{server: t, mid: start.Add(rtt / 2), rtt: rtt}
		}
	}
	return best, nil
}

// clockRate reads the clock again, at the end of the clock window, and
// works out its rate against this machine's monotonic clock.
func (p *nodeProbe) clockRate(ctx context.Context, timeout time.Duration) {
	r := &p.rep
	if r.Err != nil || r.ClockErr != nil || p.first.mid.IsZero() {
		return
	}
	c := p.conn.client
	s, err := readClock(ctx, c, timeout)
	if err != nil {
		r.ClockErr = err
		return
	}
	elapsed := s.mid.Sub(p.first.mid)
	if elapsed <= 0 {
		return
	}
	r.ClockRate = float64(s.server.Sub(p.first.server)) / float64(elapsed)
	r.ClockRateUncertainty = float64(p.first.rtt/2+s.rtt/2) / float64(elapsed)
	r.ClockOffset, r.ClockUncertainty = s.server.Sub(s.mid), s.rtt/2
}

func (a *nodeAssessment) clock() {
	n := a.n
	if n.ClockErr != nil {
		a.unverified(Clock, Warning, "clock not verified: "+oneLine(n.ClockErr), "allow TIME (ACL SETUSER USER +time)")
		return
	}
	ttl, factor := a.cfg.ttl, a.cfg.driftFactor
	drift := clock.Drift(ttl, factor)
	summary := fmt.Sprintf("offset %s ±%s against this machine", signedDur(n.ClockOffset), roundDur(n.ClockUncertainty))
	if n.ClockRate > 0 {
		summary += fmt.Sprintf(", rate %s ±%.3f%%", fmtPercent(n.ClockRate-1), 100*n.ClockRateUncertainty)
	}
	var warn []string
	if absDur(n.ClockOffset)-n.ClockUncertainty > drift {
		warn = append(warn, fmt.Sprintf("offset beyond the drift allowance %s (TTL %s × %g + 2ms)", roundDur(drift), ttl, factor))
	}
	if n.ClockRate > 0 && math.Abs(n.ClockRate-1)-n.ClockRateUncertainty > factor {
		warn = append(warn, fmt.Sprintf("rate beyond the drift factor %g%%", 100*factor))
	}
	if len(warn) > 0 {
		a.add(Clock, Warning, summary+": "+strings.Join(warn, "; "),
			"synchronise the clocks of the servers and this machine (NTP: chrony or systemd-timesyncd), or raise the drift factor (WithDriftFactor)")
		return
	}
	a.add(Clock, OK, summary, "")
}

// clocksFinding compares the servers' clocks with each other.
func clocksFinding(nodes []Node, cfg *config) Finding {
	f := Finding{Check: Clock, Severity: OK}
	var measured []*Node
	for i := range nodes {
		if n := &nodes[i]; n.Err == nil && n.ClockErr == nil {
			measured = append(measured, n)
		}
	}
	if len(measured) < 2 {
		f.Summary = "fewer than two clocks read: nothing to compare"
		return f
	}
	drift := clock.Drift(cfg.ttl, cfg.driftFactor)
	// The widest gap between two servers beyond what the round trips can
	// explain, in offset and in rate.
	var (
		gap, rateGap   float64
		gapAt, rateAt  string
		offset, offErr time.Duration
	)
	for i, x := range measured {
		for _, y := range measured[i+1:] {
			d := absDur(x.ClockOffset-y.ClockOffset) - x.ClockUncertainty - y.ClockUncertainty
			if float64(d) > gap {
				gap, gapAt = float64(d), x.Addr+" and "+y.Addr
				offset, offErr = absDur(x.ClockOffset-y.ClockOffset), x.ClockUncertainty+y.ClockUncertainty
			}
			if x.ClockRate > 0 && y.ClockRate > 0 {
				if r := math.Abs(x.ClockRate-y.ClockRate) - x.ClockRateUncertainty - y.ClockRateUncertainty; r > rateGap {
					rateGap, rateAt = r, x.Addr+" and "+y.Addr
				}
			}
		}
	}
	var warn []string
	if time.Duration(gap) > drift {
		warn = append(warn, fmt.Sprintf("%s differ by %s ±%s, beyond the drift allowance %s", gapAt, roundDur(offset), roundDur(offErr), roundDur(drift)))
	}
	if rateGap > cfg.driftFactor {
		warn = append(warn, fmt.Sprintf("%s run at rates %s apart at least, beyond the drift factor %g%%", rateAt, fmtPercent(rateGap), 100*cfg.driftFactor))
	}
	if len(warn) > 0 {
		f.Severity = Warning
		f.Summary = "servers' clocks: " + strings.Join(warn, "; ")
		f.Fix = "synchronise the servers' clocks (NTP: chrony or systemd-timesyncd)"
		return f
	}
	f.Summary = fmt.Sprintf("the %d servers' clocks agree within the drift allowance %s", len(measured), roundDur(drift))
	return f
}
