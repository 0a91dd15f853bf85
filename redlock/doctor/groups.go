package doctor

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// errNotRead stands for a setting whose reading gave no error and no value.
var errNotRead = errors.New("not read")

// readExtra reads the settings of configExtra[p.kind]. A cluster's that
// cannot be read leave ClusterErr set, a Sentinel group master's leave
// ConfigErr set, and the setting unknown.
func (p *nodeProbe) readExtra(cfg []*redis.MapStringStringCmd) {
	r := &p.rep
	for i, cmd := range cfg {
		name := configExtra[p.kind][i]
		v, ok := cmd.Val()[name]
		var err error
		n, convErr := strconv.Atoi(v)
		switch {
		case cmd.Err() != nil:
			err = cmd.Err()
		case !ok:
			err = fmt.Errorf("CONFIG GET %s: no such setting", name)
		case convErr != nil:
			err = fmt.Errorf("CONFIG GET %s: %q is no number", name, v)
		}
		switch {
		case err != nil && p.kind == KindCluster:
			r.ClusterErr = err
		case err != nil:
			r.ConfigErr = firstErr(r.ConfigErr, err)
		case name == "cluster-node-timeout":
			r.ClusterNodeTimeout = time.Duration(n) * time.Millisecond
		case name == "min-replicas-to-write":
			r.MinReplicasToWrite = n
		case name == "min-replicas-max-lag":
			r.MinReplicasMaxLag = n
		}
	}
}

// firstErr is err, or else other.
func firstErr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// readCluster reads a cluster master's cluster_state.
func (p *nodeProbe) readCluster(cmd *redis.StringCmd) {
	if err := cmd.Err(); err != nil {
		p.rep.ClusterErr = fmt.Errorf("CLUSTER INFO: %w", err)
		return
	}
	p.rep.ClusterState = parseInfo(cmd.Val())["cluster_state"]
}

// groupFindings are the findings about a Cluster or Sentinel node as a
// whole, once its masters were found.
func groupFindings(n *Node, guard bool) []Finding {
	var out []Finding
	switch n.Kind {
	case KindCluster:
		out = append(out, slotsFinding(n))
	case KindSentinel:
		out = append(out, sentinelsFinding(n))
		if f, ok := minReplicasFinding(n); ok {
			out = append(out, f)
		}
	}
	if f, ok := failoverFinding(n, guard); ok {
		out = append(out, f)
	}
	return out
}

// slotsFinding says whether every slot of a cluster is served, by masters
// that say cluster_state:ok.
func slotsFinding(n *Node) Finding {
	f := Finding{Check: Slots, Node: n.Addr}
	var failing, unknown []string
	for _, s := range n.Shards {
		switch {
		case s.Err != nil:
		case s.ClusterErr != nil:
			unknown = append(unknown, s.Addr+": "+oneLine(s.ClusterErr))
		case s.ClusterState != "ok":
			failing = append(failing, fmt.Sprintf("%s (%s)", s.Addr, orUnknown(s.ClusterState)))
		}
	}
	switch {
	case len(failing) > 0:
		f.Severity = Error
		f.Summary = "cluster_state not ok on " + strings.Join(failing, ", ") + ": the cluster refuses every call there, so the node votes no"
		f.Fix = "bring the cluster back to cluster_state:ok (CLUSTER INFO): every slot served (redis-cli --cluster fix), its failed masters back or failed over"
	case n.Slots < wire.Slots:
		f.Severity = Warning
		f.Summary = fmt.Sprintf("%d of %d slots served by no master: the node votes no for the keys in them", wire.Slots-n.Slots, wire.Slots)
		f.Fix = "give every slot a master (redis-cli --cluster fix)"
	case len(unknown) > 0:
		f.Severity, f.Unverified = Warning, true
		f.Summary = fmt.Sprintf("all %d slots served by %d masters; cluster_state not verified: %s", wire.Slots, len(n.Shards), strings.Join(unknown, "; "))
		f.Fix = "allow CLUSTER INFO and CLUSTER SLOTS (ACL SETUSER USER +cluster|info +cluster|slots)"
	default:
		f.Summary = fmt.Sprintf("all %d slots served by %d masters, cluster_state ok", wire.Slots, len(n.Shards))
	}
	return f
}

// sentinelsFinding says whether every sentinel of a group answers and
// names the same master.
func sentinelsFinding(n *Node) Finding {
	f := Finding{Check: Sentinels, Node: n.Addr}
	named := map[string]int{}
	var order, failed []string
	for _, a := range n.Sentinels {
		if a.Err != nil {
			failed = append(failed, a.Addr+": "+oneLine(a.Err))
			continue
		}
		if named[a.Master]++; named[a.Master] == 1 {
			order = append(order, a.Master)
		}
	}
	counts := make([]string, len(order))
	for i, m := range order {
		counts[i] = fmt.Sprintf("%s by %d", m, named[m])
	}
	switch {
	case len(order) > 1:
		f.Severity = Warning
		f.Summary = fmt.Sprintf("the sentinels name %d masters (%s): a failover under way, or sentinels that do not see each other; checked %s",
			len(order), strings.Join(counts, ", "), n.Shards[0].Addr)
		f.Fix = "check again once the failover has ended; if they still disagree, mend the sentinels' network or settings (SENTINEL MASTER on each)"
	case len(failed) > 0:
		f.Severity = Warning
		f.Summary = fmt.Sprintf("%d of %d sentinels answer, naming %s; %s", len(n.Sentinels)-len(failed), len(n.Sentinels), order[0], strings.Join(failed, "; "))
		f.Fix = "start the sentinels that do not answer, or correct their addresses (FailoverOptions.SentinelAddrs): a failover needs a majority of them"
	default:
		f.Summary = fmt.Sprintf("the %d sentinels name %s", len(n.Sentinels), order[0])
	}
	return f
}

// minReplicasFinding judges a Sentinel group master's min-replicas-to-write:
// without it, a demoted master takes writes until a sentinel reconfigures
// it, and a Locker that still counts it as the master gets votes there.
func minReplicasFinding(n *Node) (Finding, bool) {
	m := &n.Shards[0]
	f := Finding{Check: Failover, Node: n.Addr, Shard: m.Addr}
	switch {
	case m.Err != nil:
		return f, false
	case m.MinReplicasToWrite < 0:
		f.Severity, f.Unverified = Warning, true
		f.Summary = "min-replicas-to-write not verified: " + oneLine(firstErr(m.ConfigErr, errNotRead))
		f.Fix = "check min-replicas-to-write 1 or more on the group's servers, or allow CONFIG GET (ACL SETUSER USER +config|get)"
	case m.MinReplicasToWrite == 0:
		f.Severity = Warning
		f.Summary = "min-replicas-to-write 0: after a failover the demoted master takes writes until a sentinel reconfigures it (10 s measured), " +
			"and a Locker that still counts it as the master is granted locks there"
		f.Fix = "min-replicas-to-write 1 and min-replicas-max-lag 10 on every server of the group (CONFIG SET and redis.conf): " +
			"a demoted master then refuses writes once cut off from its replicas (0.19 s after the switch, measured)"
	case m.Replicas < m.MinReplicasToWrite:
		f.Severity = Error
		f.Summary = fmt.Sprintf("min-replicas-to-write %d with %d replica(s) connected: the master refuses every write", m.MinReplicasToWrite, m.Replicas)
		f.Fix = "bring its replicas back, or lower min-replicas-to-write to the replicas it keeps"
	default:
		f.Summary = fmt.Sprintf("min-replicas-to-write %d, min-replicas-max-lag %ds: a demoted master refuses writes once cut off from its replicas",
			m.MinReplicasToWrite, m.MinReplicasMaxLag)
	}
	return f, true
}

// failoverFinding says what a failover of one of the node's masters does
// to the locks it granted: a replica that lags is promoted without them,
// which only the restart guard notices. A cluster's cluster-node-timeout
// is how long a failed master's slots vote no before that; it bounds no
// loss (a master cut off with its clients takes writes for that long, and
// its replicas never see them), so it changes no severity.
func failoverFinding(n *Node, guard bool) (Finding, bool) {
	f := Finding{Check: Failover, Node: n.Addr}
	reached, with := 0, 0
	var timeouts []time.Duration
	for _, s := range n.Shards {
		if s.Err != nil || s.InfoErr != nil {
			continue
		}
		if reached++; s.Replicas > 0 {
			with++
		}
		if t := s.ClusterNodeTimeout; t > 0 && !slices.Contains(timeouts, t) {
			timeouts = append(timeouts, t)
		}
	}
	if reached == 0 {
		return f, false
	}
	masters := fmt.Sprintf("%d of %d masters have replicas", with, reached)
	if n.Kind == KindSentinel {
		masters = fmt.Sprintf("the master has %d replica(s)", n.Shards[0].Replicas)
	}
	switch {
	case with == 0:
		f.Summary = "no master has a replica: nothing fails over, and a failed master votes no until it is back"
	case !guard:
		f.Severity = Warning
		f.Summary = masters + " and the restart guard is off: a failover promotes a replica that may lack locks its master granted (replication is asynchronous), and it grants them again"
		f.Fix = "turn on the restart guard (WithRestartGuard, --restart-guard) and bootstrap once: a promoted replica then abstains for the maximum TTL"
	default:
		f.Summary = masters + "; the restart guard keeps a promoted replica out of the votes for the maximum TTL"
	}
	if len(timeouts) > 0 && with > 0 {
		slices.Sort(timeouts)
		f.Summary += fmt.Sprintf("; cluster-node-timeout %s: a failed master's slots vote no for that long and an election", timeouts[0])
		if len(timeouts) > 1 {
			f.Summary += fmt.Sprintf(" (up to %s on some masters)", timeouts[len(timeouts)-1])
		}
	}
	return f, true
}
