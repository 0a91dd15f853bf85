package redlock

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/clock"
)

// assess turns the nodes' facts into findings, against the Locker's
// configuration: its TTL and drift factor (what the clocks may differ by),
// its node timeout (how slow a node may be) and its restart guard.
func assess(nodes []NodeReport, cfg *config, need int, window time.Duration) *Report {
	rep := &Report{Nodes: nodes, Quorum: need, ClockWindow: window, GuardInUse: cfg.guard > 0}
	fresh := true // no node has a marker: a cluster that never ran guarded
	for _, n := range nodes {
		if n.Guard.Marker {
			rep.GuardInUse, fresh = true, false
		}
	}
	owner := map[string]int{} // run_id → the first node that reached it
	for i := range nodes {
		n := &nodes[i]
		if n.Err == nil && n.Guard.Known && rep.GuardInUse && fresh {
			n.Guard.BootstrapNeeded = true
		}
		a := nodeAssessment{n: n, cfg: cfg, guard: rep.GuardInUse, fresh: fresh}
		if n.Err == nil && n.RunID != "" {
			if o, seen := owner[n.RunID]; seen {
				a.sameAs = nodes[o].Addr
			} else {
				owner[n.RunID] = i
			}
		}
		rep.Findings = append(rep.Findings, a.findings()...)
	}
	rep.Findings = append(rep.Findings, clocksFinding(nodes, cfg))
	rep.Findings = append(rep.Findings, countFindings(nodes, need, rep.GuardInUse)...)
	return rep
}

// nodeAssessment assesses one node.
type nodeAssessment struct {
	n     *NodeReport
	cfg   *config
	guard bool // the restart guard is in use on the cluster
	fresh bool // no node has a marker yet
	// sameAs is the address of an earlier node that reached the same
	// server; "" when none did.
	sameAs string
	out    []Finding
}

func (a *nodeAssessment) add(check string, s Severity, summary, fix string) {
	a.out = append(a.out, Finding{Check: check, Node: a.n.Addr, Severity: s, Summary: summary, Fix: fix})
}

func (a *nodeAssessment) unverified(check string, s Severity, summary, fix string) {
	a.add(check, s, summary, fix)
	a.out[len(a.out)-1].Unverified = true
}

func (a *nodeAssessment) findings() []Finding {
	n := a.n
	if n.Err != nil {
		a.add(CheckReach, SeverityError, "unreachable: "+oneLine(n.Err), reachFix(n.Err))
		return a.out
	}
	a.reach()
	a.version()
	a.scripts()
	a.identity()
	a.role()
	a.persistence()
	a.memory()
	a.clock()
	a.guardState()
	return a.out
}

// aclFix is the fix for a user that lacks a permission: the whole rule,
// since one refusal hides the next.
const aclFix = "ACL SETUSER USER " + ACLRule + " (USER: the nodes' user; see ACLRule)"

// reachFix is the fix for a node that could not be used at all: the
// credentials when the server refused them, its ACL when it refused a
// command, else the node's address.
func reachFix(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"):
		return "correct the user name or password given for this node (the URL's user:password, or the client's Username and Password), or the server's (requirepass, ACL SETUSER)"
	case strings.Contains(msg, "NOAUTH"):
		return "give this node's password (in the URL as redis://:PASSWORD@host:port, or the client's Password)"
	case strings.Contains(msg, "NOPERM"):
		return aclFix
	}
	return "start the node or correct its address"
}

func (a *nodeAssessment) reach() {
	n := a.n
	summary := fmt.Sprintf("answers in %s (slowest of %d: %s)", roundDur(n.Latency), checkPings, roundDur(n.MaxLatency))
	if n.MaxLatency > a.cfg.nodeTimeout/2 {
		a.add(CheckReach, SeverityWarning, summary+fmt.Sprintf(", above half the node timeout %s: the node will often count as failed", a.cfg.nodeTimeout),
			"raise the node timeout (WithNodeTimeout, --node-timeout) or move the node closer")
		return
	}
	a.add(CheckReach, SeverityOK, summary, "")
}

func (a *nodeAssessment) version() {
	n := a.n
	if n.InfoErr != nil {
		a.unverified(CheckVersion, SeverityWarning, "server version, role and memory not verified: INFO refused: "+oneLine(n.InfoErr),
			"allow INFO (ACL SETUSER USER +info): the lock's connections need it too")
		return
	}
	if major, _, _ := strings.Cut(n.Version, "."); a.guard {
		if v, err := strconv.Atoi(major); err == nil && v < 7 {
			a.add(CheckVersion, SeverityError, "Redis "+n.Version+": the restart guard needs 7.0 or later (the node abstains)", "upgrade the server to Redis 7.0 or later")
			return
		}
	}
	a.add(CheckVersion, SeverityOK, "Redis "+n.Version, "")
}

func (a *nodeAssessment) scripts() {
	n := a.n
	if n.ScriptsErr == nil {
		a.add(CheckScripts, SeverityOK, "the library's scripts run (EVALSHA, EVAL, CLIENT INFO)", "")
		return
	}
	fix := ""
	if strings.Contains(n.ScriptsErr.Error(), "NOPERM") {
		fix = aclFix
	}
	a.add(CheckScripts, SeverityError, "the library cannot run: "+oneLine(n.ScriptsErr), fix)
}

func (a *nodeAssessment) identity() {
	n := a.n
	switch {
	case n.RunID == "":
		a.unverified(CheckIdentity, SeverityWarning, "server identity not verified: INFO shows no run_id", "allow INFO (ACL SETUSER USER +info)")
	case a.sameAs != "":
		a.add(CheckIdentity, SeverityError, fmt.Sprintf("same server as %s (run_id %s): it would vote twice; the lock refuses it", a.sameAs, n.RunID),
			"remove one of the two addresses from the node list")
	default:
		a.add(CheckIdentity, SeverityOK, "run_id "+n.RunID, "")
	}
}

func (a *nodeAssessment) role() {
	n := a.n
	switch {
	case n.InfoErr != nil:
		a.unverified(CheckRole, SeverityWarning, "role not verified: INFO refused", "allow INFO (ACL SETUSER USER +info)")
	case n.Cluster:
		a.add(CheckRole, SeverityError, "a Redis Cluster node (cluster_enabled:1): a lock's keys fall in several hash slots, and a cluster is one node to Redlock",
			"cluster-enabled no: give one independent master per node")
	case n.Role != "master":
		of := ""
		if n.MasterAddr != "" {
			of = " of " + n.MasterAddr
		}
		a.add(CheckRole, SeverityError, fmt.Sprintf("a %s%s: it refuses writes, and votes only once promoted, without the locks it never saw", roleName(n.Role), of),
			"list masters only (REPLICAOF NO ONE on it, or give the master's address)")
	case n.Replicas > 0 && !a.guard:
		a.add(CheckRole, SeverityWarning, fmt.Sprintf("master with %d replica(s): a failover to one that lags forgets locks it granted", n.Replicas),
			"no automatic failover of lock nodes, or turn on the restart guard (WithRestartGuard, --restart-guard)")
	case n.Replicas > 0:
		a.add(CheckRole, SeverityOK, fmt.Sprintf("master with %d replica(s); the restart guard catches a promotion", n.Replicas), "")
	default:
		a.add(CheckRole, SeverityOK, "master", "")
	}
}

func roleName(role string) string {
	if role == "slave" {
		return "replica"
	}
	return "server with role " + strconv.Quote(role)
}

// guardFix is the fix for a node that may forget locks.
const guardFix = "appendonly yes and appendfsync always, or the restart guard (WithRestartGuard, --restart-guard; then bootstrap once)"

func (a *nodeAssessment) persistence() {
	n := a.n
	settings := "appendonly " + orUnknown(n.AppendOnly)
	if n.AppendOnly == "yes" {
		settings += ", appendfsync " + orUnknown(n.AppendFsync)
	}
	if n.ConfigErr == nil && n.Save != "" {
		settings += fmt.Sprintf(", save %q", n.Save)
	}
	switch {
	case a.guard && n.Guard.Current && n.Guard.Abstain == 0:
		a.add(CheckPersistence, SeverityOK, "guard on and effective ("+settings+"): a node that forgets locks abstains", "")
	case a.guard:
		a.add(CheckPersistence, SeverityOK, "guard on ("+settings+"): the node abstains after a loss; its state is under guard", "")
	case n.AppendOnly == "yes" && n.AppendFsync == "always":
		a.add(CheckPersistence, SeverityOK, "restarts keep locks ("+settings+")", "")
	case n.AppendOnly == "no":
		why := "a restart starts empty"
		if n.Save != "" {
			why = "a restart reloads an older snapshot"
		}
		a.add(CheckPersistence, SeverityWarning, "restarts lose locks, guard needed ("+settings+": "+why+")", guardFix)
	case n.AppendOnly == "yes" && n.AppendFsync != "":
		a.add(CheckPersistence, SeverityWarning, "restarts may lose the last writes' locks, guard needed ("+settings+")", guardFix)
	case n.ConfigErr != nil:
		a.unverified(CheckPersistence, SeverityWarning, "not verified ("+settings+"): CONFIG refused: "+oneLine(n.ConfigErr)+"; restarts lose locks unless appendfsync always",
			"check appendonly yes and appendfsync always in the server's settings, or turn on the restart guard")
	default:
		a.unverified(CheckPersistence, SeverityWarning, "not verified ("+settings+")", guardFix)
	}
}

func (a *nodeAssessment) memory() {
	n := a.n
	const fix = "maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)"
	if n.MaxMemoryPolicy == "" || n.MaxMemory < 0 {
		a.unverified(CheckMemory, SeverityWarning, "maxmemory-policy not verified: INFO refused", "allow INFO (ACL SETUSER USER +info)")
		return
	}
	evicted := ""
	if n.EvictedKeys > 0 {
		evicted = fmt.Sprintf("; %d keys evicted since the server started", n.EvictedKeys)
	}
	switch {
	case n.MaxMemoryPolicy != "noeviction" && n.MaxMemory > 0:
		a.add(CheckMemory, SeverityError, fmt.Sprintf("maxmemory-policy %s with maxmemory %s may evict lock keys (used %s)%s", n.MaxMemoryPolicy, fmtBytes(n.MaxMemory), fmtBytes(n.UsedMemory), evicted), fix)
	case n.MaxMemoryPolicy != "noeviction":
		a.add(CheckMemory, SeverityWarning, fmt.Sprintf("maxmemory-policy %s evicts lock keys as soon as a maxmemory is set (none now, used %s)%s", n.MaxMemoryPolicy, fmtBytes(n.UsedMemory), evicted), fix)
	case n.MaxMemory > 0:
		free := 1 - float64(n.UsedMemory)/float64(n.MaxMemory)
		summary := fmt.Sprintf("noeviction, used %s of maxmemory %s (%.0f%% free)%s", fmtBytes(n.UsedMemory), fmtBytes(n.MaxMemory), 100*free, evicted)
		if free < 0.1 {
			a.add(CheckMemory, SeverityWarning, summary+": acquisitions fail when it is full", "raise maxmemory, or free memory on the node")
			return
		}
		a.add(CheckMemory, SeverityOK, summary, "")
	default:
		a.add(CheckMemory, SeverityOK, fmt.Sprintf("noeviction, no maxmemory (used %s)%s", fmtBytes(n.UsedMemory), evicted), "")
	}
}

func (a *nodeAssessment) clock() {
	n := a.n
	if n.ClockErr != nil {
		a.unverified(CheckClock, SeverityWarning, "clock not verified: "+oneLine(n.ClockErr), "allow TIME (ACL SETUSER USER +time)")
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
		a.add(CheckClock, SeverityWarning, summary+": "+strings.Join(warn, "; "),
			"synchronise the clocks of the servers and this machine (NTP: chrony or systemd-timesyncd), or raise the drift factor (WithDriftFactor)")
		return
	}
	a.add(CheckClock, SeverityOK, summary, "")
}

func (a *nodeAssessment) guardState() {
	n, g := a.n, a.n.Guard
	switch {
	case !a.guard:
		a.add(CheckGuard, SeverityOK, "not in use (no marker on any node)", "")
	case !g.Known:
		a.unverified(CheckGuard, SeverityWarning, "state not verified: "+oneLine(n.GuardErr), "allow GET, PTTL and INFO on the redlock:* keys")
	case g.Abstain > 0:
		a.add(CheckGuard, SeverityWarning, fmt.Sprintf("abstains for %s more: it lost its memory (restart, reload, promotion, eviction or flush)", g.Abstain.Round(time.Millisecond)),
			"none: it votes again when its quarantine ends (bootstrap does not shorten it)")
	case g.Marker && !g.Current:
		a.add(CheckGuard, SeverityWarning, "marker stale: "+g.Stale+"; the node abstains for the maximum TTL at its next guarded acquisition",
			"none: it votes again a maximum TTL after that; or start the wait now with bootstrap (with --restart-guard)")
	case g.Marker:
		a.add(CheckGuard, SeverityOK, "marker current: the node votes", "")
	case a.fresh:
		a.add(CheckGuard, SeverityWarning, "no marker (a fresh cluster): bootstrap needed, or every node abstains for the maximum TTL at first use",
			"redlock bootstrap (Locker.Bootstrap), once, on the fresh cluster")
	default:
		a.add(CheckGuard, SeverityWarning, "no marker while other nodes have theirs: it lost its memory (restart without persistence, flush); it abstains for the maximum TTL at its next guarded acquisition",
			"none: it votes again a maximum TTL after that; do not bootstrap it while locks it granted may still be held")
	}
}

// clocksFinding compares the servers' clocks with each other.
func clocksFinding(nodes []NodeReport, cfg *config) Finding {
	f := Finding{Check: CheckClock, Severity: SeverityOK}
	var measured []*NodeReport
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
		f.Severity = SeverityWarning
		f.Summary = "servers' clocks: " + strings.Join(warn, "; ")
		f.Fix = "synchronise the servers' clocks (NTP: chrony or systemd-timesyncd)"
		return f
	}
	f.Summary = fmt.Sprintf("the %d servers' clocks agree within the drift allowance %s", len(measured), roundDur(drift))
	return f
}

// countFindings advises on the number of nodes, and says when too few of
// them can vote for any lock to be granted.
func countFindings(nodes []NodeReport, need int, guard bool) []Finding {
	n := len(nodes)
	f := Finding{Check: CheckNodes, Severity: SeverityWarning}
	switch {
	case n == 1:
		f.Summary = "1 node: single-node mode, whose locks last only as long as that server keeps them"
		f.Fix = "use 3 or 5 independent masters for quorum mode"
	case n == 2:
		f.Summary = "2 nodes: a lock needs both, so one failed node stops every lock"
		f.Fix = "add a third independent master"
	case n%2 == 0:
		f.Summary = fmt.Sprintf("%d nodes, quorum %d: tolerates %s failed, as %s would", n, need, nodeCount(n-need), nodeCount(n-1))
		f.Fix = "use an odd number of nodes: add or remove one"
	default:
		f.Severity = SeverityOK
		f.Summary = fmt.Sprintf("%d nodes, quorum %d: tolerates %s failed", n, need, nodeCount(n-need))
	}
	out := []Finding{f}
	voting, seen := 0, map[string]bool{}
	for _, x := range nodes {
		switch {
		case x.Err != nil, x.ScriptsErr != nil, x.Cluster, x.Role != "" && x.Role != "master", seen[x.RunID]:
			continue
		case guard && (x.Guard.Abstain > 0 || x.MaxMemoryPolicy != "noeviction" && x.MaxMemory > 0):
			continue
		}
		if x.RunID != "" {
			seen[x.RunID] = true
		}
		voting++
	}
	if voting < need {
		out = append(out, Finding{Check: CheckNodes, Severity: SeverityError,
			Summary: fmt.Sprintf("only %d of %d nodes can grant a lock now, %d needed: no lock can be obtained", voting, n, need),
			Fix:     "fix the nodes' errors above"})
	}
	return out
}

// oneLine is an error's message on one line, without the library's prefix.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "redlock: ")), " ")
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// roundDur rounds a duration for people: to the microsecond below a
// millisecond, to 10 µs below a second, to the millisecond above.
func roundDur(d time.Duration) time.Duration {
	switch {
	case absDur(d) < time.Millisecond:
		return d.Round(time.Microsecond)
	case absDur(d) < time.Second:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// nodeCount is "1 node" or "n nodes".
func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}

// signed is a duration with its sign: "+1.2ms", "-30µs".
func signedDur(d time.Duration) string {
	if r := roundDur(d); r >= 0 {
		return "+" + r.String()
	}
	return roundDur(d).String()
}

// percent is a fraction as a signed percentage: "+50.000%".
func fmtPercent(f float64) string { return fmt.Sprintf("%+.3f%%", 100*f) }

// bytes is a size for people: "1.5MB".
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KB", "MB", "GB", "TB"} {
		v, suffix = v/unit, s
		if v < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f%s", v, suffix)
}
