package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/internal/pgtest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// Scenario is a chaos run: which faults, on what kind of cluster.
type Scenario struct {
	Name string
	// Cluster is the kind of cluster it needs: persistence, maxmemory,
	// replicas, the clock shim.
	Cluster cluster.Options
	// Faults names faults of the catalogue (Faults).
	Faults []string
	// Guard turns on the library's restart guard (WithRestartGuard with
	// the TTL as maximum, the cluster seeded with Bootstrap first).
	Guard bool
	// Sample draws every fault at random from Faults; by default the
	// nemesis first injects each of them once, in a shuffled order.
	Sample bool
	// Asserted says that the README claims the library survives the
	// scenario (with the restart guard and fencing where it says they are
	// needed, clock drift within the drift factor): the test fails on any
	// violation, unless AwaitingLibraryFixes names the scenario. A
	// scenario that is not Asserted lies outside the claims; its report
	// says what happened, and a long run should show violations there:
	// proof that the checker sees them.
	Asserted bool
	// ClockRate is the speed of a clock-rate fault's server clock (1.05
	// runs 5% fast).
	ClockRate float64
	// Behaviours makes the clients use the lock as real programs do
	// (Config.Behaviours).
	Behaviours bool
	// CalmTTLs, if set, overrides the mean gap between faults, in TTLs:
	// the restart guard keeps a restarted node out for a TTL, and needs
	// calm to let it back in.
	CalmTTLs float64
	// CountersLost says that nodes lose their fencing counters (restart
	// without persistence). Fences still grow when the restart guard is on
	// (a counter starts again from the server's clock while its node sits
	// out), so they are asserted in guarded scenarios and only reported in
	// the others.
	CountersLost bool
	// LockDelay, in TTLs, turns on redlock.WithLockDelay in every client,
	// and turns fencing off: lock-delay alone must then keep a client
	// paused past its validity from overlapping with the next holder.
	LockDelay float64
	// Unfenced turns fencing off, for the control of a lock-delay
	// scenario: the same pauses without lock-delay may lose updates.
	Unfenced bool
	// Workload, if set, is what the clients do instead of single-key
	// locks: "election" or "multi" (election.go), "shared-token" or
	// "reacquire" (tokens.go).
	Workload string
	// Majority makes every server fault hit a majority of the nodes at
	// once, instead of the fault's own targets: a lock granted on every
	// node is then forgotten by enough of them for a second majority.
	Majority bool
	// LongHolds, if set, overrides Config.LongHolds: a fault that makes
	// nodes forget shows only while locks are held through it.
	LongHolds float64
	// TTL, if set, overrides Config.TTL (fault durations scale with it).
	TTL time.Duration
	// NoEffects turns the effects checker off, for a workload whose
	// clients share a lock on purpose (a shared token): their updates may
	// interleave without any lock being broken.
	NoEffects bool
	// Resource, if set, puts the effects checker's protected counters in
	// PostgreSQL behind the fenced package's SQL helper instead of Redis
	// (Config.Resource), with every holder's operations fence-checked.
	Resource string
	// AssertEffects asserts that no update of the protected resource is
	// lost in a scenario outside the lock's claims (not Asserted): its
	// fenced writes must refuse every holder the lock itself let overlap.
	AssertEffects bool
	// LongOnly keeps an Asserted scenario out of the short runs (the
	// default suite): its long locks and faults need more time than a
	// short run gives a scenario.
	LongOnly bool
	// WatchCounters follows the fencing counters on every node and
	// records an anomaly when one goes back (counters.go): for scenarios
	// whose nodes never lose their memory.
	WatchCounters bool
}

// Scenarios are the suite's runs, in order.
var Scenarios = []Scenario{
	{Name: "kill-restart-persistent", Cluster: cluster.Options{Persistent: true}, Asserted: true, Faults: []string{"kill", "restart"}},
	{Name: "pause", Asserted: true, Faults: []string{"pause-short", "pause-long"}},
	{Name: "partition", Asserted: true, Faults: []string{"blackhole", "drop-replies", "isolate"}},
	{Name: "latency", Asserted: true, Faults: []string{"latency", "latency-all"}},
	{Name: "reset", Asserted: true, Faults: []string{"reset"}},
	{Name: "client-pause", Asserted: true, Faults: []string{"client-pause", "client-stop"}},
	{Name: "mixed-persistent", Cluster: cluster.Options{Persistent: true}, Asserted: true, Sample: true, Faults: []string{
		"kill", "restart", "pause-short", "pause-long", "blackhole", "drop-replies",
		"isolate", "latency", "reset", "client-pause", "client-stop",
	}},
	// Minority crashes without persistence, one after another: a node
	// that forgot a lock can join a new majority with nodes that never
	// had it (the lock was taken while they were down, or they forgot it
	// in an earlier crash). Not asserted; the guarded variant is.
	{Name: "minority-restart-unpersisted", CountersLost: true, Faults: []string{"kill", "restart"}},
	{Name: "minority-restart-guarded", Guard: true, Asserted: true, CountersLost: true, Faults: []string{"kill", "restart"}},
	// The known weakness: a majority restarts without persistence and
	// forgets the locks it granted. Not asserted. With 4s locks and more
	// long holds, as the unguarded data restarts below (a restarted node
	// sits out every vote for about a second).
	{Name: "majority-restart-unpersisted", CalmTTLs: 1, CountersLost: true, LongHolds: 0.05, TTL: 4 * time.Second, Faults: []string{"majority-restart"}},
	// The same with the restart guard: a node that lost its memory
	// abstains for the maximum TTL, so exclusion holds. The fencing
	// counters are still lost.
	{Name: "majority-restart-guarded", CalmTTLs: 1, Guard: true, Asserted: true, CountersLost: true, Faults: []string{"majority-restart"}},

	// The ways a node forgets without a plain restart (see the data faults
	// in nemesis.go). Each runs unguarded, outside the claims, and
	// guarded, where the README claims exclusion: the restart guard must
	// notice each of them and keep the node out for the maximum TTL.
	// The unguarded restarts hit a majority, with more long holds and a
	// longer TTL: a minority that forgets leaves a lock granted on all
	// five nodes held on the other three, and a restarted node stays out
	// of every vote for about a second (go-redis opens its dial breaker
	// after the refused dials of the restart and probes once a second),
	// so locks of 500 ms were over by the time it voted again.
	{Name: "restart-rdb-unguarded", CountersLost: true, Majority: true, LongHolds: 0.05, TTL: 4 * time.Second, Faults: []string{"restart-rdb"}},
	{Name: "restart-rdb-guarded", Guard: true, Asserted: true, CountersLost: true, CalmTTLs: 1, Faults: []string{"restart-rdb"}},
	{Name: "restart-everysec-unguarded", Cluster: cluster.Options{EverySec: true}, CountersLost: true, Majority: true, LongHolds: 0.05, TTL: 4 * time.Second, Faults: []string{"restart-everysec"}},
	{Name: "restart-everysec-guarded", Cluster: cluster.Options{EverySec: true}, Guard: true, Asserted: true, CountersLost: true, CalmTTLs: 1, Faults: []string{"restart-everysec"}},
	// A majority at once, with 4s locks, as the unguarded restarts.
	{Name: "failover-unguarded", Cluster: cluster.Options{Replicas: true}, CountersLost: true, Majority: true, LongHolds: 0.05, TTL: 4 * time.Second, Faults: []string{"failover"}},
	{Name: "failover-guarded", Cluster: cluster.Options{Replicas: true}, Guard: true, Asserted: true, CountersLost: true, CalmTTLs: 1, Faults: []string{"failover"}},
	{Name: "evict-unguarded", Cluster: cluster.Options{MaxMemory: evictMemory}, CountersLost: true, Faults: []string{"evict"}},
	{Name: "evict-guarded", Cluster: cluster.Options{MaxMemory: evictMemory}, Guard: true, Asserted: true, CountersLost: true, CalmTTLs: 1, Faults: []string{"evict"}},
	{Name: "flush-unguarded", CountersLost: true, Faults: []string{"flush"}},
	{Name: "flush-guarded", Guard: true, Asserted: true, CountersLost: true, CalmTTLs: 1, Faults: []string{"flush"}},
	// A master briefly turned replica answers writes with READONLY: a
	// passing error, which must not disable the node.
	{Name: "readonly", Asserted: true, Faults: []string{"readonly"}},
	// Server clocks: a drift within the drift factor (1%) is claimed, a
	// larger one and a jump are not.
	{Name: "clock-rate-within-drift", Cluster: cluster.Options{Clock: true}, Asserted: true, ClockRate: 1.005, Faults: []string{"clock-rate"}},
	{Name: "clock-rate-beyond-drift", Cluster: cluster.Options{Clock: true}, ClockRate: 1.05, Faults: []string{"clock-rate"}},
	{Name: "clock-jump", Cluster: cluster.Options{Clock: true}, Faults: []string{"clock-jump"}},
	// The scenarios above that lose updates on purpose, because they lie
	// outside the lock's assumptions, again with the protected resource
	// in PostgreSQL behind the fenced package's SQL helper, every holder's
	// read and write fenced: the lock's own violations are reported, not
	// asserted, and no update may be lost (AssertEffects). The clock-rate
	// one runs its transactions at REPEATABLE READ, where overlapping
	// holders meet serialization failures and retry.
	{Name: "minority-restart-unpersisted-pg", Resource: ResourcePostgres, AssertEffects: true, CountersLost: true, Faults: []string{"kill", "restart"}},
	{Name: "majority-restart-unpersisted-pg", Resource: ResourcePostgres, AssertEffects: true, CalmTTLs: 1, CountersLost: true, LongHolds: 0.05, TTL: 4 * time.Second,
		Faults: []string{"majority-restart"}},
	{Name: "clock-rate-beyond-drift-pg", Cluster: cluster.Options{Clock: true}, Resource: ResourcePostgresRR, AssertEffects: true, ClockRate: 1.05, Faults: []string{"clock-rate"}},
	{Name: "clock-jump-pg", Cluster: cluster.Options{Clock: true}, Resource: ResourcePostgres, AssertEffects: true, Faults: []string{"clock-jump"}},
	// Clients paused past their validity: the lock's checker ends their
	// belief at Until (so this is Asserted as client-pause is), and the
	// resource turns their late writes away.
	{Name: "client-pause-pg", Resource: ResourcePostgres, Asserted: true, AssertEffects: true, Faults: []string{"client-pause", "client-stop"}},

	// Clients that use the API as real programs do, under the faults the
	// library claims to survive. Not client-stop: a client process stopped
	// past its validity while it runs Do cannot be told (no lock can), and
	// Do gives its work no deadline to cut its belief at; the other
	// scenarios stop client processes in plain holds, whose belief ends at
	// Until.
	{Name: "clients-realistic", Cluster: cluster.Options{Persistent: true}, Asserted: true, Behaviours: true, Sample: true, Faults: []string{
		"kill", "restart", "pause-short", "pause-long", "blackhole", "latency", "client-pause",
	}},
	// Every data fault at random, guarded: the whole claim at once.
	{Name: "mixed-data-guarded", Cluster: cluster.Options{MaxMemory: evictMemory}, Guard: true, Asserted: true, Sample: true,
		CountersLost: true, CalmTTLs: 1, ClockRate: 1.005, Faults: []string{
			"restart-rdb", "evict", "flush", "readonly", "kill", "restart", "pause-short", "client-pause", "client-stop",
		}},

	// Lock-delay: a client paused past its validity (for up to 2.5 TTLs)
	// finds its key still held for the delay (3 TTLs), so nobody else gets
	// in while it may still write: asserted without fencing. The control,
	// the same pauses unfenced and without lock-delay, is outside the
	// claims and may lose updates.
	{Name: "client-pause-lock-delay", Asserted: true, LockDelay: 3, Faults: []string{"client-pause", "client-stop"}},
	{Name: "client-pause-unfenced", Unfenced: true, Faults: []string{"client-pause", "client-stop"}},

	// Leader election and multi-key locks (election.go) under the faults
	// the library claims to survive, on the default cluster (no fsync on
	// every write to slow the nodes down), its crashes guarded. Server and
	// client faults only: the clients then reach the servers directly,
	// without the proxies, which a loaded machine running -race slows past
	// the node timeout.
	{Name: "election", Guard: true, Asserted: true, Workload: workloadElection, Sample: true, Faults: []string{
		"kill", "restart", "pause-short", "pause-long", "client-stop",
	}},
	{Name: "multi-key", Guard: true, Asserted: true, Workload: workloadMulti, Unfenced: true, Sample: true, Faults: []string{
		"kill", "restart", "pause-short", "pause-long", "client-stop",
	}},
	// A semaphore of two and a read-write lock under the nemesis of the
	// mixed scenarios: never three permits at once, never a reader beside
	// a writer or two writers, writers' fences in order (the checker's
	// Slots and Shared holds). The writers' effects are checked (no lost
	// update); a permit or a reader protects no single-writer resource.
	{Name: "semaphore", Guard: true, Asserted: true, Workload: workloadSemaphore, NoEffects: true, Sample: true, Faults: []string{
		"kill", "restart", "pause-short", "pause-long", "blackhole", "drop-replies", "latency", "reset", "client-stop",
	}},
	{Name: "rwlock", Guard: true, Asserted: true, Workload: workloadRWLock, Sample: true, Faults: []string{
		"kill", "restart", "pause-short", "pause-long", "blackhole", "drop-replies", "latency", "reset", "client-stop",
	}},
	// The same two under the rest of the nemesis. The faults that make a
	// node forget (a snapshot reload, eviction, a flush, a promoted
	// replica, a majority's restart) and the other data faults, guarded,
	// with a server clock within the drift factor; and the faults on the
	// paths between one client and the nodes (a proxy that moves
	// connections, a partition of one client, late replies) with the
	// network faults left out above, guarded too: the guard's marker check
	// runs on a moved connection's server.
	{Name: "semaphore-data-guarded", Cluster: dataNemesis, Guard: true, Asserted: true, Workload: workloadSemaphore, NoEffects: true,
		Sample: true, CountersLost: true, CalmTTLs: 1, ClockRate: 1.005, Faults: dataFaults},
	{Name: "rwlock-data-guarded", Cluster: dataNemesis, Guard: true, Asserted: true, Workload: workloadRWLock,
		Sample: true, CountersLost: true, CalmTTLs: 1, ClockRate: 1.005, Faults: dataFaults},
	{Name: "semaphore-paths-guarded", Guard: true, Asserted: true, Workload: workloadSemaphore, NoEffects: true, Sample: true, Faults: pathFaults},
	{Name: "rwlock-paths-guarded", Guard: true, Asserted: true, Workload: workloadRWLock, Sample: true, Faults: pathFaults},
	// The faults that found the admin paths' holes: an operator's
	// ClearQuarantine right after a minority restarted empty (refused
	// while any permit or lease lives: a second owner beside one would
	// be a violation), ReleaseAfter cooldowns, and, on the semaphore, a
	// client in four of another size (refused while a permit of the
	// other size lives; no permit may make either size larger).
	{Name: "semaphore-admin-guarded", Guard: true, Asserted: true, Workload: workloadSemaphoreAdmin, NoEffects: true, Sample: true,
		CountersLost: true, Faults: []string{"restart-clear", "restart", "pause-short", "client-stop"}},
	{Name: "rwlock-admin-guarded", Guard: true, Asserted: true, Workload: workloadRWLockAdmin, Sample: true,
		CountersLost: true, Faults: []string{"restart-clear", "restart", "pause-short", "client-stop"}},

	// A proxy moves one client's open connections to one node onto
	// another node's server: one server answers for two of that client's
	// nodes, and must still vote once per call, with or without the
	// restart guard (whose marker check runs on that same server). The
	// clients reach the servers through paths of their own (paths.go).
	{Name: "moving-proxy", Asserted: true, Faults: []string{"move-connections"}},
	{Name: "moving-proxy-guarded", Guard: true, Asserted: true, Faults: []string{"move-connections"}},
	// Clients that share one token on a key (WithToken), each cut off
	// from a different minority of the nodes, obtain, release and release
	// with a cooldown, while third parties with tokens of their own fight
	// for the key: a hold belongs to the handle that took it, so no third
	// party may hold the key while a sharer believes it does. Half the
	// holds are long, so that many span a partition's end: a release
	// that then reaches nodes its Lock never held takes away another
	// sharer's hold there. Fencing and the effects checker are off: the
	// sharers share their holds.
	{Name: "shared-token-partial-partition", Asserted: true, Workload: workloadSharedToken, Unfenced: true, NoEffects: true, LongHolds: 0.5,
		Faults: []string{"partial-partition"}},
	// Each client releases and at once obtains the key again with the
	// same token, many times over, with fencing, while some nodes answer
	// late (their replies only, or both ways): fences must grow from each
	// holder to the next, whatever a late reply to an earlier acquisition
	// sets off; and no node's counter may ever go back (counters.go).
	{Name: "reacquire-fenced", Asserted: true, Workload: workloadReacquire, WatchCounters: true,
		Faults: []string{"slow-replies", "latency"}},
}

// evictMemory is the maxmemory of the evict scenarios' servers: small, so
// that filling it is quick.
const evictMemory = "8mb"

// The cluster and the faults of the semaphore's and the read-write lock's
// data scenarios, and the faults of their path scenarios: with the
// scenarios above, every fault of the catalogue but the clock faults
// beyond the drift factor and restart-everysec (a second of lost writes,
// the same forgetting as restart-rdb for the guard).
var (
	dataNemesis = cluster.Options{MaxMemory: evictMemory, Replicas: true, Clock: true}
	dataFaults  = []string{"restart-rdb", "evict", "flush", "failover", "majority-restart", "readonly", "clock-rate", "client-pause"}
	pathFaults  = []string{"move-connections", "partial-partition", "slow-replies", "isolate", "latency-all", "pause-short"}
)

// AwaitingLibraryFixes names Asserted scenarios that the library is known
// to fail, each with the fix it waits for: a new claim's scenario can land
// before its fix. They run and are reported (with their violations) but do
// not fail the test; when the fix lands, delete the entry and the scenario
// is asserted.
var AwaitingLibraryFixes = map[string]string{}

// Pending returns the library fix an Asserted scenario waits for, or "".
func (sc *Scenario) Pending() string { return AwaitingLibraryFixes[sc.Name] }

// ProcessesOnly reports whether any of the scenario's faults or cluster
// options needs the process backend.
func (sc *Scenario) ProcessesOnly() bool {
	if sc.Cluster.Replicas || sc.Cluster.Clock {
		return true
	}
	for _, name := range sc.Faults {
		if Faults[name].ProcessesOnly {
			return true
		}
	}
	return false
}

// NeedsProxies reports whether the scenario's clients must reach the nodes
// through the proxies: a network fault acts there, and failover moves a
// node's address there. The other scenarios' clients connect to the
// servers directly, which halves the work per request.
func (sc *Scenario) NeedsProxies() bool {
	for _, name := range sc.Faults {
		f := Faults[name]
		if f.NeedsProxy || !(f.Server || f.Client || f.Process || f.OnPaths != nil) {
			return true
		}
	}
	return false
}

// UsesPaths reports whether any of the scenario's faults acts on the
// clients' own paths to the nodes (Fault.OnPaths): the clients then reach
// the nodes through them.
func (sc *Scenario) UsesPaths() bool {
	for _, name := range sc.Faults {
		if Faults[name].OnPaths != nil {
			return true
		}
	}
	return false
}

// StopsClients reports whether any of the scenario's faults stops a
// client (a pause in this process, or SIGSTOP of a client process): such a
// client may write after its validity, which only fencing can catch.
func (sc *Scenario) StopsClients() bool {
	for _, name := range sc.Faults {
		if f := Faults[name]; f.Client || f.Process {
			return true
		}
	}
	return false
}

// HasDataFaults reports whether any of the scenario's faults is a data
// fault (Fault.Data).
func (sc *Scenario) HasDataFaults() bool {
	for _, name := range sc.Faults {
		if Faults[name].Data {
			return true
		}
	}
	return false
}

// TouchesServers reports whether any of the scenario's faults acts on the
// servers themselves (kill, restart, pause), where the backends differ.
func (sc *Scenario) TouchesServers() bool {
	for _, name := range sc.Faults {
		if Faults[name].Server {
			return true
		}
	}
	return false
}

// Config sets up a run.
type Config struct {
	// Clients is the number of concurrent lockers in this process;
	// Processes the number of client processes (each one locker) on top,
	// which the client-stop fault freezes with SIGSTOP. Keys is the number
	// of keys they contend on.
	Clients, Processes, Keys int
	// Goroutines is how many goroutines of each client (in this process
	// or a client process) share its Locker, taking locks in turn (and
	// passing them by handoff).
	Goroutines int
	// TTL and NodeTimeout are the lock options of every client.
	TTL, NodeTimeout time.Duration
	// MaxHold bounds how long a client holds a lock (uniform in
	// [0, MaxHold)); ExtendShare is the share of holds that extend once.
	MaxHold     time.Duration
	ExtendShare float64
	// LongHolds is the share of holds that last a quarter to half the TTL
	// whatever MaxHold says: with short holds, they keep locks held while
	// a node forgets them.
	LongHolds float64
	// Fencing turns on redlock.WithFencing in every client; the checker
	// verifies the fences once they are not all 0.
	Fencing bool
	// Effects turns on the effects checker: holders update a counter per
	// key in a separate Redis by read-modify-write around their work (the
	// hold), and the store counts lost updates.
	Effects bool
	// CheckedEffects makes careful holders' read-modify-writes fence-checked
	// too, as the README asks of a holder that may stop past its validity:
	// a client stopped between its last look at the deadline and its write
	// (SIGSTOP, or a loaded machine) writes late, and only the fence turns
	// it away. Run sets it in fenced scenarios that stop clients.
	CheckedEffects bool
	// Behaviours makes the clients use the lock as real programs do
	// (behaviour.go): re-entry with other TTLs, Extend racing Release, Do
	// with work that panics or ignores its context, KeepAlive,
	// ReleaseAfter, handoffs between goroutines. Run sets it from the
	// scenario.
	Behaviours bool
	// Guard turns on the restart guard; Run sets it from the scenario.
	Guard bool
	// Workload is the scenario's Workload; Run sets it.
	Workload string
	// Resource is the effects store's kind: "" a Redis of its own
	// (checker.Store); ResourcePostgres or ResourcePostgresRR a PostgreSQL
	// of its own through fenced.Table (checker.SQLStore), its
	// transactions at READ COMMITTED or REPEATABLE READ, every holder's
	// operations fence-checked. Run sets it from the scenario.
	Resource string
	// LockDelay is every client's redlock.WithLockDelay; Run sets it from
	// the scenario.
	LockDelay time.Duration
	// Calm is the mean gap between faults.
	Calm time.Duration
	// ClockRate is the clock-rate fault's server clock speed; Run sets it
	// from the scenario.
	ClockRate float64
	// Duration is how long the nemesis keeps injecting faults (at least
	// one of each kind of the scenario, however long that takes).
	Duration time.Duration
	// Seed makes the run replayable.
	Seed uint64
	// ProfileDir, if set, is where client processes write their CPU
	// profiles (clientN-PID.prof).
	ProfileDir string
	// Logf receives a line per fault.
	Logf func(format string, args ...any) `json:"-"`
}

// Nodes is the suite's cluster size: five masters, so that two at a time
// can fail.
const Nodes = 5

// DefaultConfig returns the suite's settings: four clients in this process
// and two client processes, four goroutines each, on three keys, 500ms
// locks with a 100ms node timeout.
func DefaultConfig() Config {
	return Config{
		Clients:     4,
		Goroutines:  4,
		Processes:   2,
		Keys:        3,
		TTL:         500 * time.Millisecond,
		NodeTimeout: 100 * time.Millisecond,
		MaxHold:     150 * time.Millisecond,
		ExtendShare: 0.2,
		Fencing:     true,
		Effects:     true,
		Calm:        250 * time.Millisecond,
		Duration:    3 * time.Second,
		Logf:        func(string, ...any) {},
	}
}

// ErrNoBaseline is Run's error when the clients made too few acquisitions
// before any fault: the run could not start, and says nothing of safety.
var ErrNoBaseline = errors.New("no baseline")

// Run runs a scenario and returns the checker's report. The error reports
// a harness failure (a node that would not start); violations are in the
// report.
//
// The cluster's persistence must match the scenario's; Run resets it (heals
// every node and empties it) first, so one cluster serves many scenarios.
func Run(ctx context.Context, c Quorum, sc Scenario, cfg Config) (_ *checker.Report, runErr error) {
	var faults []Fault
	for _, name := range sc.Faults {
		f, ok := Faults[name]
		if !ok {
			return nil, fmt.Errorf("scenario %s: no fault %q", sc.Name, name)
		}
		faults = append(faults, f)
	}
	// Each scenario draws from its own stream of the seed, so one scenario
	// replays alone (go test -run) as it ran among the others.
	h := fnv.New64a()
	h.Write([]byte(sc.Name))
	stream := h.Sum64()

	if sc.Resource != "" && (sc.Unfenced || sc.LockDelay > 0 || sc.NoEffects) {
		return nil, fmt.Errorf("scenario %s: a %s resource needs fencing and the effects checker", sc.Name, sc.Resource)
	}
	if c.Options() != sc.Cluster {
		return nil, fmt.Errorf("scenario %s needs a %v cluster, not %v", sc.Name, sc.Cluster, c.Options())
	}
	// Every scenario starts from empty, healthy nodes.
	if err := c.Reset(ctx); err != nil {
		return nil, fmt.Errorf("resetting the cluster: %w", err)
	}

	sc.configure(&cfg)
	if cfg.Guard {
		if err := bootstrap(ctx, c, &cfg); err != nil {
			return nil, err
		}
	}

	hist := checker.NewHistory(time.Now())
	var res *checker.Resource
	if cfg.Fencing {
		res = checker.NewResource(hist)
	}
	w := newWorkload(c, &cfg, hist, res, [2]uint64{cfg.Seed, stream})
	if !sc.NeedsProxies() {
		w.addrs = c.ServerAddrs()
	}
	if sc.UsesPaths() {
		p, err := newPaths(cfg.Clients+cfg.Processes, w.addrs)
		if err != nil {
			return nil, fmt.Errorf("starting the client paths: %w", err)
		}
		// Closed once the clients are done with them.
		defer func() { runErr = errors.Join(runErr, p.close()) }()
		w.paths = p
	}
	if cfg.Effects {
		// The protected resource lives in a Redis, or a PostgreSQL, of its
		// own, which no fault touches.
		addr, stopStore, err := startEffectsStore(cfg.Resource)
		if err != nil {
			return nil, fmt.Errorf("starting the effects store: %w", err)
		}
		defer func() { runErr = errors.Join(runErr, stopStore()) }()
		fx, err := openEffects(&cfg, addr)
		if err != nil {
			return nil, err
		}
		if m, ok := fx.(interface{ Migrate(context.Context) error }); ok {
			if err := m.Migrate(ctx); err != nil {
				return nil, errors.Join(err, fx.Close())
			}
		}
		defer func() { runErr = errors.Join(runErr, fx.Close()) }()
		w.storeAddr, w.fx = addr, fx
	}
	var watch *counterWatch
	if sc.WatchCounters {
		var err error
		if watch, err = watchCounters(c.ServerAddrs(), hist); err != nil {
			return nil, err
		}
		defer func() {
			if watch != nil {
				runErr = errors.Join(runErr, watch.close())
			}
		}()
	}
	if err := w.startProcesses(); err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx, hist, res) }()

	// The baseline: the clients show what they do without faults before
	// the nemesis starts, once they are running: once they have made a
	// lock each on average, and (for up to ten seconds more, which a busy
	// machine may need to start the client processes) every one of them
	// has acquired one.
	clients := max(cfg.Clients+cfg.Processes, 1)
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	err := hist.WaitAcquisitions(wait, clients)
	cancel()
	if err != nil {
		r := checker.Check(hist)
		err = fmt.Errorf("%w: %d acquisitions in 30s without faults (failures %v): %w", ErrNoBaseline, r.Acquisitions, r.Failures, err)
	} else {
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = hist.WaitClients(wait, clients) // a client still starting only blurs the baseline
		cancel()
		hist.ClientsRunning(time.Now())
		// A long run measures its baseline for longer, so that the
		// availability figures compare against more than a moment.
		sleep(ctx, cfg.Duration/10)
		n := &nemesis{
			quorum: c, workload: w, cfg: &cfg, faults: faults, sample: sc.Sample, majority: sc.Majority, history: hist, logf: cfg.Logf,
			rng: rand.New(rand.NewPCG(cfg.Seed, stream)),
		}
		err = n.run(ctx, time.Now().Add(cfg.Duration))
	}
	stop()
	werr := <-done
	if watch != nil {
		// Before the check, so that it sees every write the clients made.
		werr = errors.Join(werr, watch.close())
		watch = nil
	}
	hist.Finish(time.Now())
	err = errors.Join(err, werr, c.Heal(context.WithoutCancel(ctx)))
	r := checker.Check(hist)
	if w.fx != nil {
		var ferr error
		r.Effects, ferr = w.fx.Effects(context.WithoutCancel(ctx))
		err = errors.Join(err, ferr)
	}
	return &r, err
}

// The kinds of Config.Resource besides Redis.
const (
	ResourcePostgres   = "postgres"
	ResourcePostgresRR = "postgres-repeatable-read"
)

// startEffectsStore starts the effects store's server for resource and
// returns its address (a URL for PostgreSQL) and how to stop it.
func startEffectsStore(resource string) (addr string, stop func() error, err error) {
	switch resource {
	case "":
		srv, err := redistest.Start(redistest.Options{})
		if err != nil {
			return "", nil, err
		}
		return srv.Addr, srv.Close, nil
	case ResourcePostgres, ResourcePostgresRR:
		srv, err := pgtest.Start()
		if err != nil {
			return "", nil, err
		}
		return srv.URL("postgres"), srv.Close, nil
	}
	return "", nil, fmt.Errorf("no resource %q", resource)
}

// openEffects opens the effects store of cfg.Resource at addr.
func openEffects(cfg *Config, addr string) (checker.Effector, error) {
	switch cfg.Resource {
	case "":
		return checker.NewStore(addr), nil
	case ResourcePostgres:
		return checker.NewSQLStore(addr, sql.LevelReadCommitted)
	case ResourcePostgresRR:
		return checker.NewSQLStore(addr, sql.LevelRepeatableRead)
	}
	return nil, fmt.Errorf("no resource %q", cfg.Resource)
}

// configure sets the parts of cfg that the scenario decides.
func (sc *Scenario) configure(cfg *Config) {
	if sc.TTL > 0 {
		cfg.TTL = sc.TTL
	}
	cfg.Guard = sc.Guard
	cfg.ClockRate = sc.ClockRate
	cfg.Behaviours = sc.Behaviours
	cfg.Workload = sc.Workload
	cfg.LockDelay = time.Duration(sc.LockDelay * float64(cfg.TTL))
	if sc.LockDelay > 0 || sc.Unfenced {
		cfg.Fencing = false
	}
	// A stopped client may write after its deadline: in a fenced
	// scenario only the fence check keeps its write from losing an
	// update, as the README tells users of such clients. A PostgreSQL
	// resource is written as a user protects one: every write fenced.
	cfg.Resource = sc.Resource
	cfg.CheckedEffects = cfg.Fencing && (sc.StopsClients() || sc.Resource != "")
	if sc.CalmTTLs > 0 {
		cfg.Calm = time.Duration(sc.CalmTTLs * float64(cfg.TTL))
	}
	if sc.LongHolds > 0 {
		cfg.LongHolds = sc.LongHolds
	}
	if sc.NoEffects {
		cfg.Effects = false
	}
}

// lockOptions are the options of every client's Locker.
func (cfg *Config) lockOptions() []redlock.Option {
	opts := []redlock.Option{redlock.WithTTL(cfg.TTL), redlock.WithNodeTimeout(cfg.NodeTimeout)}
	if cfg.Fencing {
		opts = append(opts, redlock.WithFencing())
	}
	if cfg.Guard {
		opts = append(opts, redlock.WithRestartGuard(cfg.TTL))
	}
	if cfg.LockDelay > 0 {
		opts = append(opts, redlock.WithLockDelay(cfg.LockDelay))
	}
	return opts
}

// bootstrap seeds the restart guard's markers on a fresh cluster, as its
// operator would, so that the nodes vote from the start.
func bootstrap(ctx context.Context, c Quorum, cfg *Config) error {
	if c.Options().RedisCluster {
		// A cluster's bootstrap seeds the marker of each of its 16384
		// slots, a round each, and fails if one round misses the node
		// timeout: an operator gives it more time than a lock's round
		// (half the TTL, which still leaves a validity).
		bcfg := *cfg
		bcfg.NodeTimeout = max(cfg.NodeTimeout, cfg.TTL/2)
		cfg = &bcfg
	}
	return withLocker(c.Addrs(), cfg, func(l *redlock.Locker) error {
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		// A first contact costs a connection's set-up round trip, which a
		// busy machine may not fit in the node timeout: try again, as an
		// operator would.
		for {
			err := l.Bootstrap(bctx)
			if err == nil || bctx.Err() != nil || !errors.Is(err, redlock.ErrNoQuorum) {
				return err
			}
		}
	})
}
