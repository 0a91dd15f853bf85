package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/quorumlock/redlock/redlock"
)

// assess turns the nodes' facts into findings, against the locks'
// settings: their TTL and drift factor (what the clocks may differ by),
// their node timeout (how slow a node may be) and their restart guard.
// need is the quorum.
func assess(nodes []Node, cfg *config, need int) *Report {
	rep := &Report{Nodes: nodes, Quorum: need, ClockWindow: cfg.window, GuardInUse: cfg.guard > 0}
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
	n     *Node
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
		a.add(Reach, Error, "unreachable: "+oneLine(n.Err), reachFix(n.Err))
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
const aclFix = "ACL SETUSER USER " + redlock.ACLRule + " (USER: the nodes' user; see ACLRule)"

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
	case strings.Contains(msg, "DB index is out of range"):
		return "give a database the server has (the URL's /DB, or the client's DB: below the server's databases setting, 16 by default)"
	case strings.Contains(msg, "TLS mismatch") || strings.Contains(msg, "TLS handshake") || strings.Contains(msg, "tls:"):
		return "make the node's URL and its server agree about TLS: rediss:// for the server's tls-port, redis:// for its plain port; " +
			"if both use TLS, check the certificates (the client's TLSConfig, --tls-ca)"
	case strings.Contains(msg, "EOF") || strings.Contains(msg, "connection reset"):
		return "the server ended the connection: if it speaks TLS on this port, use a rediss:// URL; else start the node or correct its address"
	}
	return "start the node or correct its address"
}

func (a *nodeAssessment) reach() {
	n := a.n
	summary := fmt.Sprintf("answers in %s (slowest of %d: %s)", roundDur(n.Latency), pings, roundDur(n.MaxLatency))
	if n.MaxLatency > a.cfg.nodeTimeout/2 {
		a.add(Reach, Warning, summary+fmt.Sprintf(", above half the node timeout %s: the node will often count as failed", a.cfg.nodeTimeout),
			"raise the node timeout (WithNodeTimeout, --node-timeout) or move the node closer")
		return
	}
	a.add(Reach, OK, summary, "")
}

func (a *nodeAssessment) version() {
	n := a.n
	if n.InfoErr != nil {
		a.unverified(Version, Warning, "server version, role and memory not verified: INFO refused: "+oneLine(n.InfoErr),
			"allow INFO (ACL SETUSER USER +info): the lock's connections need it too")
		return
	}
	if major, _, _ := strings.Cut(n.Version, "."); a.guard {
		if v, err := strconv.Atoi(major); err == nil && v < 7 {
			a.add(Version, Error, "Redis "+n.Version+": the restart guard needs 7.0 or later (the node abstains)", "upgrade the server to Redis 7.0 or later")
			return
		}
	}
	a.add(Version, OK, "Redis "+n.Version, "")
}

func (a *nodeAssessment) scripts() {
	n := a.n
	if n.ScriptsErr == nil {
		a.add(Scripts, OK, "the library's scripts run (EVALSHA, EVAL, CLIENT INFO)", "")
		return
	}
	fix := ""
	if strings.Contains(n.ScriptsErr.Error(), "NOPERM") {
		fix = aclFix
	}
	a.add(Scripts, Error, "the library cannot run: "+oneLine(n.ScriptsErr), fix)
}

func (a *nodeAssessment) identity() {
	n := a.n
	switch {
	case n.RunID == "":
		a.unverified(Identity, Warning, "server identity not verified: INFO shows no run_id", "allow INFO (ACL SETUSER USER +info)")
	case a.sameAs != "":
		a.add(Identity, Error, fmt.Sprintf("same server as %s (run_id %s): it would vote twice; the lock refuses it", a.sameAs, n.RunID),
			"remove one of the two addresses from the node list")
	default:
		a.add(Identity, OK, "run_id "+n.RunID, "")
	}
}

func (a *nodeAssessment) role() {
	n := a.n
	switch {
	case n.InfoErr != nil:
		a.unverified(Role, Warning, "role not verified: INFO refused", "allow INFO (ACL SETUSER USER +info)")
	case n.Cluster:
		a.add(Role, Error, "a Redis Cluster node (cluster_enabled:1): a lock's keys fall in several hash slots, and a cluster is one node to Redlock",
			"cluster-enabled no: give one independent master per node")
	case n.Role != "master":
		of := ""
		if n.MasterAddr != "" {
			of = " of " + n.MasterAddr
		}
		a.add(Role, Error, fmt.Sprintf("a %s%s: it refuses writes, and votes only once promoted, without the locks it never saw", roleName(n.Role), of),
			"list masters only (REPLICAOF NO ONE on it, or give the master's address)")
	case n.Replicas > 0 && !a.guard:
		a.add(Role, Warning, fmt.Sprintf("master with %d replica(s): a failover to one that lags forgets locks it granted", n.Replicas),
			"no automatic failover of lock nodes, or turn on the restart guard (WithRestartGuard, --restart-guard)")
	case n.Replicas > 0:
		a.add(Role, OK, fmt.Sprintf("master with %d replica(s); the restart guard catches a promotion", n.Replicas), "")
	default:
		a.add(Role, OK, "master", "")
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
		a.add(Persistence, OK, "guard on and effective ("+settings+"): a node that forgets locks abstains", "")
	case a.guard:
		a.add(Persistence, OK, "guard on ("+settings+"): the node abstains after a loss; its state is under guard", "")
	case n.AppendOnly == "yes" && n.AppendFsync == "always":
		a.add(Persistence, OK, "restarts keep locks ("+settings+")", "")
	case n.AppendOnly == "no":
		why := "a restart starts empty"
		if n.Save != "" {
			why = "a restart reloads an older snapshot"
		}
		a.add(Persistence, Warning, "restarts lose locks, guard needed ("+settings+": "+why+")", guardFix)
	case n.AppendOnly == "yes" && n.AppendFsync != "":
		a.add(Persistence, Warning, "restarts may lose the last writes' locks, guard needed ("+settings+")", guardFix)
	case n.ConfigErr != nil:
		a.unverified(Persistence, Warning, "not verified ("+settings+"): CONFIG refused: "+oneLine(n.ConfigErr)+"; restarts lose locks unless appendfsync always",
			"check appendonly yes and appendfsync always in the server's settings, or turn on the restart guard")
	default:
		a.unverified(Persistence, Warning, "not verified ("+settings+")", guardFix)
	}
}

func (a *nodeAssessment) memory() {
	n := a.n
	const fix = "maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)"
	if n.MaxMemoryPolicy == "" || n.MaxMemory < 0 {
		a.unverified(Memory, Warning, "maxmemory-policy not verified: INFO refused", "allow INFO (ACL SETUSER USER +info)")
		return
	}
	evicted := ""
	if n.EvictedKeys > 0 {
		evicted = fmt.Sprintf("; %d keys evicted since the server started", n.EvictedKeys)
	}
	switch {
	case n.MaxMemoryPolicy != "noeviction" && n.MaxMemory > 0:
		a.add(Memory, Error, fmt.Sprintf("maxmemory-policy %s with maxmemory %s may evict lock keys (used %s)%s", n.MaxMemoryPolicy, fmtBytes(n.MaxMemory), fmtBytes(n.UsedMemory), evicted), fix)
	case n.MaxMemoryPolicy != "noeviction":
		a.add(Memory, Warning, fmt.Sprintf("maxmemory-policy %s evicts lock keys as soon as a maxmemory is set (none now, used %s)%s", n.MaxMemoryPolicy, fmtBytes(n.UsedMemory), evicted), fix)
	case n.MaxMemory > 0:
		free := 1 - float64(n.UsedMemory)/float64(n.MaxMemory)
		summary := fmt.Sprintf("noeviction, used %s of maxmemory %s (%.0f%% free)%s", fmtBytes(n.UsedMemory), fmtBytes(n.MaxMemory), 100*free, evicted)
		if free < 0.1 {
			a.add(Memory, Warning, summary+": acquisitions fail when it is full", "raise maxmemory, or free memory on the node")
			return
		}
		a.add(Memory, OK, summary, "")
	default:
		a.add(Memory, OK, fmt.Sprintf("noeviction, no maxmemory (used %s)%s", fmtBytes(n.UsedMemory), evicted), "")
	}
}

// countFindings advises on the number of nodes, and says when too few of
// them can vote for any lock to be granted.
func countFindings(nodes []Node, need int, guard bool) []Finding {
	n := len(nodes)
	f := Finding{Check: Nodes, Severity: Warning}
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
		f.Severity = OK
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
		out = append(out, Finding{Check: Nodes, Severity: Error,
			Summary: fmt.Sprintf("only %d of %d nodes can grant a lock now, %d needed: no lock can be obtained", voting, n, need),
			Fix:     "fix the nodes' errors above"})
	}
	return out
}
