// Package doctor checks a deployment of Redis masters against the
// assumptions the safety of Redlock's locks rests on, and says what to
// fix: Check asks every node directly and returns a Report of findings,
// each with a severity (OK, Warning, Error), a one-line summary with its
// numbers and a one-line fix. The redlock command's "redlock doctor" prints
// it. Check takes standalone masters; CheckNodes takes nodes of every kind
// redlock.NewNodes takes (Server, Cluster, Sentinel), mixed.
//
// # What it checks
//
// Per node: that it answers, and how fast against the node timeout
// (Reach); its server version (Version); that the library's scripts and
// commands may run, ACL permissions included (Scripts); that no two nodes
// reach the same server, by run_id (Identity): a second address of one
// server would vote twice; that it is a master outside any Redis Cluster
// (Role); what a restart does to the locks it granted: appendonly,
// appendfsync and save, or the restart guard (Persistence); that its
// maxmemory-policy cannot evict lock keys, and its memory headroom
// (Memory); its clock's offset and rate against this machine's, beyond
// what the drift factor covers for the TTL (Clock); the restart guard's
// marker and quarantine: whether it abstains, for how long, and whether a
// fresh cluster needs redlock.Locker.Bootstrap (Guard). For the whole set:
// the servers' clocks against each other (Clock), the number of nodes and
// how many of them can vote (Nodes). docs/safety.md maps each check to the
// assumption it verifies; docs/cli.md shows the command's report.
//
// # Clusters and Sentinel groups
//
// CheckNodes finds the masters that cast a Cluster's or Sentinel group's
// vote: a cluster's from its slot map (CLUSTER SLOTS on connections of its
// own, never through the cluster client's routing), a group's by asking
// every sentinel (SENTINEL GET-MASTER-ADDR-BY-NAME). Each master is
// checked as a standalone one, and reported as a shard of its node
// (Node.Shards, Finding.Shard); Identity then covers every master of
// every node, so a server reached through two nodes is an Error. For a
// cluster as a whole: every slot served and cluster_state:ok (Slots); for
// a group: its sentinels answer and name one master (Sentinels), and its
// master has min-replicas-to-write (Failover). For both, whether a
// failover can promote a replica without the locks its master granted
// while the restart guard is off (Failover). A quorum with a cluster keeps
// the guard's marker and quarantine per hash slot on every node: Guard
// then reads those of every slot a master serves, and counts the slots
// that abstain, have a stale marker or none.
//
// The findings are judged against the settings the locks use, given as
// options with redlock's defaults: WithTTL, WithDriftFactor,
// WithNodeTimeout, WithRestartGuard; WithClockWindow sets how long the
// clocks' rates are watched.
//
// # How it asks
//
// Check reads and writes nothing a lock depends on: it runs the library's
// scripts on a key of its own (under redlock.ReservedPrefix) that lives a
// second at most and is deleted at once. It asks the nodes directly, not
// through a Locker's voting path, so a node that reaches the same server as
// another is reported, not refused. Where a server refuses a command
// (CONFIG is often renamed or forbidden on managed services), the finding
// says what could not be verified (Finding.Unverified) and the rest is
// still checked.
//
// It takes only the options of the clients it is given, as a Locker does,
// and opens connections of its own (no command retried, every wait bounded,
// the caller's hooks, cache and limiter left out), which it closes before
// it returns. It dials each node itself first: go-redis writes every failed
// dial of its clients to its process-wide logger, and an unreachable node
// is a finding of the report, not a line on stderr.
//
// Check runs one goroutine per node while it finds the nodes' masters,
// then one per master while it asks them (twice: before and after the
// clock window), and waits for them all each time before it goes on;
// CheckNodes runs the same.
package doctor
