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
	servers := serversOf(nodes)
	fresh := true // no server has a marker: a deployment that never ran guarded
	for _, s := range servers {
		if s.n.Guard.marked() {
			rep.GuardInUse, fresh = true, false
		}
	}
	owner := map[string]string{} // run_id → where the first server that reached it is
	for _, s := range servers {
		n := s.n
		if s.of != nil && n == &s.of.Shards[0] {
			rep.Findings = append(rep.Findings, groupFindings(s.of, rep.GuardInUse)...)
		}
		if n.Err == nil && n.Guard.Known && rep.GuardInUse && fresh {
			n.Guard.BootstrapNeeded = true
		}
		a := nodeAssessment{n: n, of: s.of, cfg: cfg, guard: rep.GuardInUse, fresh: fresh}
		if n.Err == nil && n.RunID != "" {
			if o, seen := owner[n.RunID]; seen {
				a.sameAs = o
			} else {
				owner[n.RunID] = a.where()
			}
		}
		rep.Findings = append(rep.Findings, a.findings()...)
	}
	flat := make([]Node, len(servers))
	for i, s := range servers {
		flat[i] = *s.n
	}
	rep.Findings = append(rep.Findings, clocksFinding(flat, cfg))
	rep.Findings = append(rep.Findings, countFindings(nodes, need, rep.GuardInUse)...)
	return rep
}

// server is one server that votes: a standalone node (of nil), or a shard
// of the Cluster or Sentinel node of.
type server struct {
	n  *Node
	of *Node
}

// serversOf lists the nodes' servers in order; a Cluster or Sentinel node
// whose masters could not be found stands for itself (its Err is its
// finding).
func serversOf(nodes []Node) []server {
	var out []server
	for i := range nodes {
		n := &nodes[i]
		if n.Kind == KindServer || n.Kind == "" || len(n.Shards) == 0 {
			out = append(out, server{n: n})
			continue
		}
		for j := range n.Shards {
			out = append(out, server{n: &n.Shards[j], of: n})
		}
	}
	return out
}

// nodeAssessment assesses one server.
type nodeAssessment struct {
	n     *Node
	of    *Node // the Cluster or Sentinel node of a shard; nil otherwise
	cfg   *config
	guard bool // the restart guard is in use on the deployment
	fresh bool // no server has a marker yet
	// sameAs is where an earlier server that is the same one was found;
	// "" when none was.
	sameAs string
	out    []Finding
}

// where names the server as Finding.Where does.
func (a *nodeAssessment) where() string {
	if a.of == nil {
		return a.n.Addr
	}
	return where(a.of.Addr, a.n.Addr)
}

func (a *nodeAssessment) add(check string, s Severity, summary, fix string) {
	f := Finding{Check: check, Node: a.n.Addr, Severity: s, Summary: summary, Fix: fix}
	if a.of != nil {
		f.Node, f.Shard = a.of.Addr, a.n.Addr
	}
	a.out = append(a.out, f)
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
	n, inCluster := a.n, a.of != nil && a.of.Kind == KindCluster
	switch {
	case n.InfoErr != nil:
		a.unverified(Role, Warning, "role not verified: INFO refused", "allow INFO (ACL SETUSER USER +info)")
	case n.Cluster && !inCluster:
		a.add(Role, Error, "a Redis Cluster node (cluster_enabled:1) given as one server: a lock's keys fall in several hash slots, and a cluster is one node to Redlock",
			"give the whole cluster as one Cluster node (redlock.Cluster, doctor.Cluster), or cluster-enabled no")
	case n.Role != "master":
		of := ""
		if n.MasterAddr != "" {
			of = " of " + n.MasterAddr
		}
		a.add(Role, Error, fmt.Sprintf("a %s%s: it refuses writes, and votes only once promoted, without the locks it never saw", roleName(n.Role), of),
			"list masters only (REPLICAOF NO ONE on it, or give the master's address)")
	case a.of != nil:
		// What a failover does is the node's Failover finding.
		summary := fmt.Sprintf("master with %d replica(s)", n.Replicas)
		if inCluster {
			summary += fmt.Sprintf(", serving %d slots", n.Slots)
		}
		a.add(Role, OK, summary, "")
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
