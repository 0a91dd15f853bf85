package doctor

import (
	"fmt"
	"time"
)

// Severity ranks a finding of Check.
type Severity int

const (
	// OK means the assumption holds, as far as it could be seen.
	OK Severity = iota
	// Warning means the locks work, but an assumption of the safety
	// model is weak or could not be verified: fix it or accept the risk.
	Warning
	// Error means an assumption of the safety model does not hold:
	// two clients can hold one lock, or no lock can be obtained.
	Error
)

// String returns "ok", "warning" or "error".
func (s Severity) String() string {
	switch s {
	case OK:
		return "ok"
	case Warning:
		return "warning"
	case Error:
		return "error"
	}
	return fmt.Sprintf("Severity(%d)", int(s))
}

// MarshalText writes the severity as "ok", "warning" or "error".
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads "ok", "warning" or "error"; anything else is an
// error matching redlock.ErrInvalid.
func (s *Severity) UnmarshalText(b []byte) error {
	for _, v := range []Severity{OK, Warning, Error} {
		if string(b) == v.String() {
			*s = v
			return nil
		}
	}
	return invalid("severity %q: want ok, warning or error", b)
}

// The names of the checks, in Finding.Check.
const (
	Reach       = "reach"       // the node answers; its round-trip latency
	Version     = "version"     // the server's version
	Scripts     = "scripts"     // the library's scripts and commands run (ACL permissions)
	Identity    = "identity"    // one server per node (run_id)
	Role        = "role"        // an independent master: no replica, no Redis Cluster
	Persistence = "persistence" // what a restart does to the locks a node granted
	Memory      = "memory"      // maxmemory and maxmemory-policy: no eviction of lock keys
	Clock       = "clock"       // clock offset and rate against this machine and the other servers
	Guard       = "guard"       // the restart guard's marker and quarantine
	Nodes       = "nodes"       // how many nodes, and how many can vote
	Slots       = "slots"       // a cluster's slots all served, its cluster_state ok
	Failover    = "failover"    // what a failover of a cluster's or Sentinel group's master does to locks
	Sentinels   = "sentinels"   // a Sentinel group's sentinels answer and name one master
)

// Kind is how a node was given to CheckNodes.
type Kind string

// The kinds of nodes.
const (
	KindServer   Kind = "server"   // a standalone master (Server; every client of Check)
	KindCluster  Kind = "cluster"  // a Redis Cluster (Cluster)
	KindSentinel Kind = "sentinel" // a Sentinel group (Sentinel)
)

// Finding is one thing Check found, about one node or the whole set.
type Finding struct {
	// Check names what was checked (Reach, Memory, ...).
	Check string
	// Node is the node's address, credentials removed; "" for a finding
	// about the whole set of nodes.
	Node string
	// Shard is the address of the master that the finding is about, when
	// it is one of a Cluster's or Sentinel group's (see Node.Shards); ""
	// for a finding about a standalone node or a node as a whole.
	Shard    string
	Severity Severity
	// Summary says what was found, with its numbers, on one line.
	Summary string
	// Fix says what to do about it, on one line (the setting to change,
	// the command to run); "" when there is nothing to do.
	Fix string
	// Unverified is set when the check could not be made (a refused
	// CONFIG, say); Summary then says what could not be verified.
	Unverified bool
}

// Where is the finding's Node, followed by " shard " and its Shard when it
// has one.
func (f Finding) Where() string { return where(f.Node, f.Shard) }

func where(node, shard string) string {
	if shard == "" {
		return node
	}
	return node + " shard " + shard
}

// Node is what Check learned from one node. Fields it could
// not learn keep their zero value ("" for strings, -1 for the memory
// figures and the min-replicas settings).
//
// A Cluster or Sentinel node's own entry holds Addr, Kind, Err (why its
// masters could not be found), Slots and Sentinels; the facts of the
// servers that vote for it are in Shards, one entry per master.
type Node struct {
	// Addr is the node's address, credentials removed: a Cluster's is
	// "cluster " and its seed addresses, a Sentinel group's "sentinel ",
	// its master's name and the sentinels' addresses; a shard's is its
	// master's address.
	Addr string
	// Kind is how the node was given; a shard has its node's kind.
	Kind Kind
	// Shards are the masters that cast a Cluster's or Sentinel group's
	// vote: a cluster's, in the order of their first slots, or the
	// group's master as the sentinels name it. Each has the facts of a
	// standalone node. nil for a Server.
	Shards []Node
	// Err is why the node could not be reached; nil when it answered.
	Err error
	// Latency is the median of a few round trips (PING), MaxLatency the
	// slowest of them.
	Latency, MaxLatency time.Duration
	// InfoErr is why INFO was refused; the facts it gives (version, role,
	// memory, the restart guard's stamp) are then unknown.
	InfoErr error
	// Version is the server's version (redis_version).
	Version string
	// RunID is the server's identity, new at every process start.
	RunID string
	// Role is "master" or "slave" (INFO replication); Replicas counts the
	// replicas connected to a master.
	Role     string
	Replicas int
	// MasterAddr is a replica's master, as the replica names it.
	MasterAddr string
	// Cluster is set when the server runs in Redis Cluster mode.
	Cluster bool
	// AppendOnly ("yes" or "no"), AppendFsync and Save are the persistence
	// settings; AppendFsync and Save stay "" when CONFIG was refused, and
	// ConfigErr then says why.
	AppendOnly, AppendFsync, Save string
	ConfigErr                     error
	// MaxMemory and UsedMemory are in bytes (MaxMemory 0: no limit);
	// EvictedKeys counts the keys evicted since the server started.
	MaxMemory, UsedMemory, EvictedKeys int64
	MaxMemoryPolicy                    string
	// ScriptsErr is why the library's scripts or commands cannot run on
	// the node; nil when they can.
	ScriptsErr error
	// ClockOffset is the server's clock minus this machine's, within
	// ±ClockUncertainty (half the round trip of the best of a few TIME
	// calls).
	ClockOffset, ClockUncertainty time.Duration
	// ClockRate is how many seconds the server's clock advanced per second
	// of this machine's over the clock window, within ±ClockRateUncertainty;
	// 0 when not measured.
	ClockRate, ClockRateUncertainty float64
	// ClockErr is why the server's clock could not be read (TIME).
	ClockErr error
	// Guard is the restart guard's state on the node; GuardErr is why it
	// could not be read.
	Guard    GuardState
	GuardErr error
	// Slots is, on a Cluster node, how many of the cluster's 16384 hash
	// slots some master serves; on a cluster's shard, how many it serves.
	Slots int
	// ClusterState is a cluster master's cluster_state ("ok" or "fail",
	// CLUSTER INFO) and ClusterNodeTimeout its cluster-node-timeout;
	// ClusterErr says why they could not be read.
	ClusterState       string
	ClusterNodeTimeout time.Duration
	ClusterErr         error
	// MinReplicasToWrite and MinReplicasMaxLag (in seconds) are read on a
	// Sentinel group's master: a master with fewer replicas in touch than
	// the first refuses writes.
	MinReplicasToWrite, MinReplicasMaxLag int
	// Sentinels are, on a Sentinel node, what each sentinel answered.
	Sentinels []SentinelAnswer
}

// SentinelAnswer is what one sentinel of a group said its master is.
type SentinelAnswer struct {
	// Addr is the sentinel's address, credentials removed.
	Addr string
	// Master is the address it named (SENTINEL GET-MASTER-ADDR-BY-NAME);
	// "" when it named none, and Err then says why.
	Master string
	Err    error
}

// GuardState is the restart guard's state on one node.
type GuardState struct {
	// Known is set when the marker and quarantine could be read.
	Known bool
	// Marker is set when the node has its marker; Current when the marker
	// carries this server run's stamp (its run_id and evicted-keys count),
	// so the node has not lost its memory since it was stamped.
	Marker, Current bool
	// Stale says why a marker is not current ("" when it is).
	Stale string
	// Abstain is how much longer the node abstains from every guarded vote
	// (its quarantine); 0 when it votes.
	Abstain time.Duration
	// BootstrapNeeded is set on a node of a fresh cluster (no node has a
	// marker yet) that redlock.Locker.Bootstrap would seed.
	BootstrapNeeded bool
	// Slots is how many hash slots' markers were read where the nodes
	// keep a marker and a quarantine per slot (a quorum with a Cluster
	// node: each cluster master for the slots it serves, any other master
	// for all 16384); 0 where a node keeps one of each. The fields above
	// then sum the slots up: Marker when every slot has its marker,
	// Current when every marker is current, Stale why the first stale one
	// is, Abstain the longest quarantine; Unmarked, StaleSlots and
	// Abstaining count the slots without a marker, with a stale one, and
	// in quarantine.
	Slots, Unmarked, StaleSlots, Abstaining int
}

// marked reports whether the node has a marker, in some slot at least.
func (g *GuardState) marked() bool { return g.Marker || g.Slots > g.Unmarked }

// Report is what Check found.
type Report struct {
	// Nodes holds one entry per node, in the order they were given.
	Nodes []Node
	// Findings lists every finding, ok ones included: each node's in node
	// order, then those about the whole set (Node "").
	Findings []Finding
	// Quorum is how many nodes a lock needs.
	Quorum int
	// ClockWindow is how long the clocks' rates were measured over.
	ClockWindow time.Duration
	// GuardInUse is set when Check was given WithRestartGuard or some node
	// has a marker: the guard's findings then count.
	GuardInUse bool
}

// Severity is the worst severity among the findings.
func (r *Report) Severity() Severity {
	worst := OK
	for _, f := range r.Findings {
		worst = max(worst, f.Severity)
	}
	return worst
}

// Unreachable returns the addresses of the nodes that could not be
// reached, and of the masters of a Cluster or Sentinel node that could
// not be (as Finding.Where names them).
func (r *Report) Unreachable() []string {
	var out []string
	for _, n := range r.Nodes {
		if n.Err != nil {
			out = append(out, n.Addr)
		}
		for _, s := range n.Shards {
			if s.Err != nil {
				out = append(out, where(n.Addr, s.Addr))
			}
		}
	}
	return out
}

// Problems returns the findings that are not ok, errors first, in the
// order they were found otherwise.
func (r *Report) Problems() []Finding {
	var out []Finding
	for _, s := range []Severity{Error, Warning} {
		for _, f := range r.Findings {
			if f.Severity == s {
				out = append(out, f)
			}
		}
	}
	return out
}
