package doctor

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// readGuard reads the restart guard's state: the marker's stamp against
// the server's current run_id and evicted-keys count (as the acquire script
// compares them), and the quarantine's time left.
func (p *nodeProbe) readGuard(info map[string]string, marker *redis.StringCmd, quarantine *redis.DurationCmd) {
	g := &p.rep.Guard
	mErr, qErr := marker.Err(), quarantine.Err()
	if errors.Is(mErr, redis.Nil) {
		mErr = nil
	}
	run, evicted := info["run_id"], info["evicted_keys"]
	if mErr != nil || qErr != nil || run == "" || evicted == "" {
		p.rep.GuardErr = errors.Join(mErr, qErr)
		if p.rep.GuardErr == nil {
			p.rep.GuardErr = errors.New("INFO shows no run_id or evicted_keys")
		}
		return
	}
	g.Known = true
	if q := quarantine.Val(); q > 0 {
		g.Abstain = q
	}
	stamp := marker.Val()
	if stamp == "" {
		return
	}
	g.Marker = true
	g.Stale = staleness(stamp, run, evicted)
	g.Current = g.Stale == ""
}

// staleness says why a marker's stamp is not the server's current run_id
// and evicted-keys count; "" when it is.
func staleness(stamp, run, evicted string) string {
	oldRun, oldEvicted, _ := strings.Cut(stamp, " ")
	switch {
	case oldRun != run:
		return "the server restarted or was promoted from replica since it was stamped (run_id " + oldRun + ")"
	case oldEvicted != evicted:
		return fmt.Sprintf("the server evicted keys since it was stamped (evicted_keys %s, then %s)", evicted, oldEvicted)
	}
	return ""
}

func (a *nodeAssessment) guardState() {
	n, g := a.n, a.n.Guard
	switch {
	case !a.guard:
		a.add(Guard, OK, "not in use (no marker on any node)", "")
	case !g.Known:
		a.unverified(Guard, Warning, "state not verified: "+oneLine(n.GuardErr), "allow GET, PTTL and INFO on the redlock:* keys")
	case g.Slots > 0:
		a.slotGuardState()
	case g.Abstain > 0:
		a.add(Guard, Warning, fmt.Sprintf("abstains for %s more: it lost its memory (restart, reload, promotion, eviction or flush)", g.Abstain.Round(time.Millisecond)),
			"none: it votes again when its quarantine ends (bootstrap does not shorten it)")
	case g.Marker && !g.Current:
		a.add(Guard, Warning, "marker stale: "+g.Stale+"; the node abstains for the maximum TTL at its next guarded acquisition",
			"none: it votes again a maximum TTL after that; or start the wait now with bootstrap (with --restart-guard)")
	case g.Marker:
		a.add(Guard, OK, "marker current: the node votes", "")
	case a.fresh:
		a.add(Guard, Warning, "no marker (a fresh cluster): bootstrap needed, or every node abstains for the maximum TTL at first use",
			"redlock bootstrap (Locker.Bootstrap), once, on the fresh cluster")
	default:
		a.add(Guard, Warning, "no marker while other nodes have theirs: it lost its memory (restart without persistence, flush); it abstains for the maximum TTL at its next guarded acquisition",
			"none: it votes again a maximum TTL after that; do not bootstrap it while locks it granted may still be held")
	}
}
