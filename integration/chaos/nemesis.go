package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/redlock"
)

// Fault is one kind of fault the nemesis injects.
type Fault struct {
	Name string
	// Targets says which nodes it hits: a minority by default.
	Targets Targets
	// Duration is how long the fault lasts before it is healed.
	Duration func(rng *rand.Rand, cfg *Config) time.Duration
	// Arg, if set, draws the fault's parameters once for the whole fault
	// (a latency, a clock jump), passed to Inject.
	Arg func(rng *rand.Rand, cfg *Config) Arg
	// Inject and Heal act on one node; Heal may be nil.
	Inject func(ctx context.Context, n *cluster.Node, arg Arg) error
	Heal   func(ctx context.Context, n *cluster.Node) error
	// Server marks a fault that acts on the server itself (kill, restart,
	// pause, its data or clock), where the backends differ; the others act
	// on the proxies or the clients.
	Server bool
	// ProcessesOnly marks a fault the container backend cannot inject (it
	// needs the clock shim, a replica, or the data directory).
	ProcessesOnly bool
	// Data marks a fault that makes a node forget or refuse what it
	// granted without a crash of the usual kind (the data faults below).
	Data bool
	// NeedsProxy marks a server fault that still needs the clients to go
	// through the proxies (failover moves the node's address there).
	NeedsProxy bool
	// Client marks a client pause: the nemesis stalls one in-process
	// client during a hold, and touches no node.
	Client bool
	// Process marks a client stop: the nemesis freezes one client process
	// (SIGSTOP) wherever it is, and touches no node.
	Process bool
	// Then, if set, runs once the fault is healed, with the cluster and
	// the run's config, and says what it did: an operator's step after
	// the fault (restart-clear's ClearQuarantine).
	Then func(ctx context.Context, c Quorum, cfg *Config) string
	// OnPaths, if set, marks a fault on the clients' own paths to the
	// nodes (paths.go), which can hit some clients' view of the cluster
	// and not the others': it changes the paths for d (or until ctx
	// ends), and says what it did and to which nodes. Healing then leads
	// every path back to its own node, without delay.
	OnPaths func(ctx context.Context, rng *rand.Rand, cfg *Config, p *paths, d time.Duration) (what string, nodes []int)
	// OnCluster, if set, marks a fault of Redis Cluster nodes
	// (clusterfaults.go), which acts on one shard of each target cluster
	// for d and heals it, and says what it did.
	OnCluster func(ctx context.Context, cf clusterFault, d time.Duration) (string, error)
	// OnSentinel, if set, marks a fault of Sentinel group nodes
	// (sentinelfaults.go), which acts on each target group for d and
	// heals it, and says what it did.
	OnSentinel func(ctx context.Context, sf sentinelFault, d time.Duration) (string, error)
}

// Targets says which nodes a fault hits.
type Targets int

const (
	// Minority hits 1 to (n-1)/2 nodes.
	Minority Targets = iota
	// Majority hits n/2+1 nodes.
	Majority
	// All hits every node.
	All
)

// ttlTimes returns a Duration between lo and hi times the TTL.
func ttlTimes(lo, hi float64) func(*rand.Rand, *Config) time.Duration {
	return func(rng *rand.Rand, cfg *Config) time.Duration {
		return between(rng, time.Duration(lo*float64(cfg.TTL)), time.Duration(hi*float64(cfg.TTL)))
	}
}

// Arg is the parameters of one fault, drawn once for all its nodes.
type Arg struct {
	Latency time.Duration // latency faults
	Jump    time.Duration // clock-jump
	Rate    float64       // clock-rate: the server clock's speed (1 is real)
	Policy  string        // evict: the volatile-* policy
}

func (a Arg) String() string {
	var parts []string
	if a.Latency > 0 {
		parts = append(parts, a.Latency.Round(time.Millisecond).String())
	}
	if a.Jump != 0 {
		parts = append(parts, "jump "+a.Jump.Round(time.Millisecond).String())
	}
	if a.Rate != 0 {
		parts = append(parts, fmt.Sprintf("rate x%g", a.Rate))
	}
	if a.Policy != "" {
		parts = append(parts, a.Policy)
	}
	return strings.Join(parts, ", ")
}

func noDuration(*rand.Rand, *Config) time.Duration { return 0 }

func kill(ctx context.Context, n *cluster.Node, _ Arg) error { return n.Kill(ctx) }
func restart(ctx context.Context, n *cluster.Node) error     { return n.Restart(ctx) }
func pause(ctx context.Context, n *cluster.Node, _ Arg) error {
	return n.Pause(ctx)
}
func resume(ctx context.Context, n *cluster.Node) error     { return n.Resume(ctx) }
func clearNetwork(_ context.Context, n *cluster.Node) error { n.ClearNetwork(); return nil }
func heal(ctx context.Context, n *cluster.Node) error       { return n.Heal(ctx) }

// crashRestart kills the server and starts it again at once.
func crashRestart(ctx context.Context, n *cluster.Node, _ Arg) error {
	return n.Restart(ctx)
}

// evictionPolicies are the volatile-* policies evict draws from: each
// evicts only keys with a TTL, as lock keys have.
var evictionPolicies = []string{"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"}

// Faults is the catalogue of faults, by name.
var Faults = map[string]Fault{
	// SIGKILL / docker kill, then a start on the same port and data
	// directory; with persistence the node reloads its append-only file.
	"kill": {Name: "kill", Server: true, Duration: ttlTimes(0.1, 1.5), Inject: kill, Heal: restart},
	// A crash and an immediate restart.
	"restart": {Name: "restart", Server: true, Duration: noDuration,
		Inject: crashRestart},
	// A crash and an immediate restart without persistence, after which
	// an operator runs bootstrap --clear-quarantine at once (guarded
	// scenarios): it must refuse while any hold (a lock key, a permit, a
	// reader's lease) lives on a node, and clearing when none does is
	// safe, since every hold that a minority forgot lives on on another
	// node of its majority.
	"restart-clear": {Name: "restart-clear", Server: true, Duration: noDuration,
		Inject: crashRestart, Then: clearQuarantine},
	// SIGSTOP / docker pause, shorter and longer than the TTL.
	"pause-short": {Name: "pause-short", Server: true, Duration: ttlTimes(0.1, 0.8), Inject: pause, Heal: resume},
	"pause-long":  {Name: "pause-long", Server: true, Duration: ttlTimes(1.2, 2.5), Inject: pause, Heal: resume},
	// A partition: every byte dropped both ways, connections left open.
	"blackhole": {Name: "blackhole", Duration: ttlTimes(0.2, 2), Heal: clearNetwork,
		Inject: func(_ context.Context, n *cluster.Node, _ Arg) error { return n.Blackhole() }},
	// Requests reach the server, replies are lost: the server grants
	// locks the client never hears of.
	"drop-replies": {Name: "drop-replies", Duration: ttlTimes(0.2, 1.5), Heal: clearNetwork,
		Inject: func(_ context.Context, n *cluster.Node, _ Arg) error { return n.DropReplies() }},
	// The proxy disabled: connections closed, new ones refused.
	"isolate": {Name: "isolate", Duration: ttlTimes(0.2, 1.5),
		Inject: func(_ context.Context, n *cluster.Node, _ Arg) error { n.Isolate(); return nil },
		Heal:   func(_ context.Context, n *cluster.Node) error { return n.Reconnect() }},
	// Latency spikes around the node timeout, on a minority.
	"latency": {Name: "latency", Duration: ttlTimes(0.3, 2), Heal: clearNetwork,
		Arg: func(rng *rand.Rand, cfg *Config) Arg {
			return Arg{Latency: between(rng, cfg.NodeTimeout/4, 2*cfg.NodeTimeout)}
		},
		Inject: func(_ context.Context, n *cluster.Node, a Arg) error { return n.Latency(a.Latency, a.Latency/4) }},
	// Latency on every node, some of it below the node timeout: locks
	// are granted slowly, with little validity left.
	"latency-all": {Name: "latency-all", Targets: All, Duration: ttlTimes(0.3, 1.5), Heal: clearNetwork,
		Arg: func(rng *rand.Rand, cfg *Config) Arg {
			return Arg{Latency: between(rng, cfg.NodeTimeout/8, cfg.NodeTimeout/2)}
		},
		Inject: func(_ context.Context, n *cluster.Node, a Arg) error { return n.Latency(a.Latency, a.Latency/2) }},
	// Every connection reset (TCP RST) as soon as it carries data.
	"reset": {Name: "reset", Duration: ttlTimes(0.1, 1), Heal: clearNetwork,
		Inject: func(_ context.Context, n *cluster.Node, _ Arg) error { return n.ResetPeer() }},
	// A client stops for longer than the TTL while it holds a lock.
	"client-pause": {Name: "client-pause", Client: true, Duration: ttlTimes(1.2, 2.5)},
	// A client process frozen (SIGSTOP) for about the TTL or longer,
	// wherever it is.
	"client-stop": {Name: "client-stop", Process: true, Duration: ttlTimes(0.5, 2.5)},
	// One client's connections to one node move, open as they are, to
	// another node's server and back, as a proxy that follows a failover
	// to the wrong place would move them: that client reaches one server
	// through two of its nodes, on connections that learned the right
	// server when they opened.
	"move-connections": {Name: "move-connections", Duration: ttlTimes(0.5, 2), OnPaths: moveConnections},
	// Every client cut off from a minority of the nodes of its own
	// (connections ended, new ones refused): each sees a different
	// majority.
	"partial-partition": {Name: "partial-partition", Duration: ttlTimes(0.5, 2), OnPaths: partialPartition},
	// Replies from a minority of the nodes come late, on and off, by the
	// node timeout to three times it, to every client, while commands
	// take effect at once: the nodes grant, and the clients hear of it
	// after the round, and after what they did next; and after each
	// change, a node is late for one call and on time for the next.
	"slow-replies": {Name: "slow-replies", Duration: ttlTimes(0.5, 2), OnPaths: slowReplies},
	// A majority crashes and restarts at once. Without persistence it
	// forgets the locks it granted: the known weakness of Redlock.
	"majority-restart": {Name: "majority-restart", Server: true, Targets: Majority, Duration: noDuration,
		Inject: crashRestart},

	// The data faults: the node forgets (or refuses) what it granted
	// without a network fault.

	// An RDB snapshot (SAVE), more grants, then a crash: the node
	// restarts from the snapshot and forgets every grant since, while its
	// restart guard marker (in the snapshot) is still there.
	"restart-rdb": {Name: "restart-rdb", Server: true, Data: true, Duration: ttlTimes(0.2, 1.5),
		Inject: func(ctx context.Context, n *cluster.Node, _ Arg) error { return n.Snapshot(ctx) },
		Heal:   restart},
	// appendfsync everysec and a machine crash: the tail written since the
	// last fsync (under a second) is lost.
	"restart-everysec": {Name: "restart-everysec", Server: true, Data: true, ProcessesOnly: true,
		Duration: func(rng *rand.Rand, _ *Config) time.Duration {
			return between(rng, 100*time.Millisecond, 900*time.Millisecond)
		},
		Inject: func(ctx context.Context, n *cluster.Node, _ Arg) error { return n.MarkSynced(ctx) },
		Heal:   func(ctx context.Context, n *cluster.Node) error { return n.CrashLosingUnsynced(ctx) }},
	// The replica lags (its link stalls), then the master dies and the
	// replica is promoted in its place with what it had.
	"failover": {Name: "failover", Server: true, Data: true, NeedsProxy: true, ProcessesOnly: true, Duration: ttlTimes(0.2, 1.5),
		Inject: func(ctx context.Context, n *cluster.Node, _ Arg) error { return n.StallReplica(ctx) },
		Heal:   func(ctx context.Context, n *cluster.Node) error { return n.Failover(ctx) }},
	// Memory pressure under maxmemory with a volatile-* policy: filler
	// keys with a TTL push lock keys out.
	"evict": {Name: "evict", Server: true, Data: true, Duration: ttlTimes(0.3, 1.5), Heal: heal,
		Arg: func(rng *rand.Rand, _ *Config) Arg {
			return Arg{Policy: evictionPolicies[rng.IntN(len(evictionPolicies))]}
		},
		Inject: func(ctx context.Context, n *cluster.Node, a Arg) error { return n.Fill(ctx, a.Policy) }},
	// FLUSHALL: every key, marker and counter gone at once.
	"flush": {Name: "flush", Server: true, Data: true, Duration: noDuration,
		Inject: func(ctx context.Context, n *cluster.Node, _ Arg) error { return n.Flush(ctx) }},
	// The server's wall clock jumps forward by one to three TTLs: its
	// keys expire at once. Beyond any drift margin.
	"clock-jump": {Name: "clock-jump", Server: true, Data: true, ProcessesOnly: true, Duration: ttlTimes(1, 3), Heal: heal,
		Arg: func(rng *rand.Rand, cfg *Config) Arg {
			return Arg{Jump: between(rng, cfg.TTL, 3*cfg.TTL)}
		},
		Inject: func(_ context.Context, n *cluster.Node, a Arg) error { return n.SetClock(a.Jump, 1) }},
	// The server's wall clock runs fast by Config.ClockRate for a few
	// TTLs: its keys expire early by that share.
	"clock-rate": {Name: "clock-rate", Server: true, Data: true, ProcessesOnly: true, Duration: ttlTimes(3, 8), Heal: heal,
		Arg: func(_ *rand.Rand, cfg *Config) Arg {
			return Arg{Rate: cfg.ClockRate}
		},
		Inject: func(_ context.Context, n *cluster.Node, a Arg) error { return n.SetClock(0, a.Rate) }},
	// The node briefly turns replica (of an address where nothing
	// listens): it keeps its keys and answers writes with READONLY.
	"readonly": {Name: "readonly", Server: true, Data: true, Duration: ttlTimes(0.2, 1.5),
		Inject: func(ctx context.Context, n *cluster.Node, _ Arg) error { return n.ReadOnly(ctx) },
		Heal:   func(ctx context.Context, n *cluster.Node) error { return n.Writable(ctx) }},

	// The faults of Redis Cluster nodes (clusterfaults.go), each on the
	// shard of one of the run's keys in each target cluster.

	// The key's slot moves to another master at once (resharding).
	"reshard": {Name: "reshard", Duration: noDuration, OnCluster: reshard},
	// The key's slot moves slowly: the nemesis dwells with the slot
	// MIGRATING and after each key moved, while clients race the move.
	"migrate-in-flight": {Name: "migrate-in-flight", Duration: ttlTimes(0.2, 1), OnCluster: migrateInFlight},
	// The shard's replica takes over with its master's consent: nothing
	// is lost.
	"cluster-failover": {Name: "cluster-failover", Duration: noDuration, OnCluster: clusterFailover},
	// The replica's link is cut for a while, then its master dies and
	// the replica takes over without the writes of that while.
	"cluster-failover-lost-writes": {Name: "cluster-failover-lost-writes", Duration: ttlTimes(0.2, 1), OnCluster: clusterFailoverLosingWrites},
	// The shard's master is killed, then restarts empty.
	"shard-kill":    {Name: "shard-kill", Duration: ttlTimes(0.1, 1.5), OnCluster: shardKill},
	"shard-restart": {Name: "shard-restart", Duration: noDuration, OnCluster: shardKill},

	// The faults of Sentinel group nodes (sentinelfaults.go), each on a
	// whole group.

	// The sentinels promote the replica (SENTINEL FAILOVER); the
	// demoted master is left as they leave it for a while.
	"sentinel-failover": {Name: "sentinel-failover", Duration: ttlTimes(0.2, 1), OnSentinel: sentinelFailover},
	// The replica's link is cut for a while, the master acknowledging
	// writes it never receives, then the sentinels promote it.
	"sentinel-failover-lost-writes": {Name: "sentinel-failover-lost-writes", Duration: ttlTimes(0.2, 1), OnSentinel: sentinelFailoverLosingWrites},
}

// clockLayout is how the nemesis log stamps a fault, as the checker's
// reports stamp holds, so that a violation can be laid against the faults.
const clockLayout = "15:04:05.000000"

// nemesis injects faults one at a time, with calm gaps between them.
type nemesis struct {
	quorum   Quorum
	workload *Workload
	cfg      *Config
	faults   []Fault
	sample   bool
	// majority makes every server fault hit a majority (Scenario.Majority).
	majority bool
	history  *checker.History
	rng      *rand.Rand
	logf     func(format string, args ...any)
}

// run injects faults until until has passed and every fault of the
// scenario has been injected at least once (in a shuffled first round), so
// even a short run covers them all; with sample, until one fault has been
// injected.
func (n *nemesis) run(ctx context.Context, until time.Time) error {
	first := slices.Clone(n.faults)
	n.rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	if n.sample {
		first = first[:1]
	}
	for i := 0; ; i++ {
		if i >= len(first) && !time.Now().Before(until) {
			return nil
		}
		if !sleep(ctx, between(n.rng, n.cfg.Calm/2, n.cfg.Calm*3/2)) {
			return ctx.Err()
		}
		f := n.faults[n.rng.IntN(len(n.faults))]
		if i < len(first) {
			f = first[i]
		}
		if err := n.inject(ctx, f); err != nil {
			return fmt.Errorf("fault %s: %w", f.Name, err)
		}
	}
}

func (n *nemesis) inject(ctx context.Context, f Fault) error {
	d := f.Duration(n.rng, n.cfg)
	switch {
	case f.Client:
		return n.stallClient(ctx, f, d)
	case f.Process:
		return n.stopProcess(ctx, f, d)
	case f.OnPaths != nil:
		return n.onPaths(ctx, f, d)
	case f.OnCluster != nil:
		return n.onClusters(ctx, f, d)
	case f.OnSentinel != nil:
		return n.onSentinels(ctx, f, d)
	}
	return n.onNodes(ctx, f, d)
}

// stallClient pauses an in-process client for d during its next hold.
func (n *nemesis) stallClient(ctx context.Context, f Fault, d time.Duration) error {
	if n.cfg.Clients == 0 {
		return errors.New("no in-process clients to pause (Config.Clients is 0)")
	}
	i := n.rng.IntN(n.cfg.Clients)
	// A client takes the pause in its next hold, which may be late
	// (a waiter of a full semaphore holds nothing for a while): the
	// nemesis waits for it up to two TTLs beyond the pause, then goes
	// on without recording it.
	sctx, cancel := context.WithTimeout(ctx, d+2*n.cfg.TTL)
	began, ended, err := n.workload.Stall(sctx, i, d)
	cancel()
	if err != nil && ctx.Err() == nil {
		n.logf("nemesis: %s: client %d took no pause within %v", f.Name, i, d+2*n.cfg.TTL)
		return nil
	}
	if err != nil {
		return err
	}
	n.history.AddFault(checker.Fault{Kind: f.Name, Nodes: []int{i}, Start: began, End: ended})
	n.logf("nemesis: %s client %d for %v from %s", f.Name, i, ended.Sub(began).Round(time.Millisecond), began.Format(clockLayout))
	return nil
}

// onNodes injects a fault of the standalone nodes (Inject and Heal) on
// its targets, and heals it after d.
func (n *nemesis) onNodes(ctx context.Context, f Fault, d time.Duration) error {
	c, ok := n.quorum.(*cluster.Cluster)
	if !ok {
		return fmt.Errorf("a fault of standalone nodes on %v nodes", n.quorum.Options())
	}
	var arg Arg
	if f.Arg != nil {
		arg = f.Arg(n.rng, n.cfg)
	}
	t := f.Targets
	if n.majority && f.Server && t == Minority {
		t = Majority
	}
	targets := n.targets(t)
	// Faults are healed even when the run is being cancelled.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	start := time.Now()
	var err error
	for _, i := range targets {
		if err = f.Inject(hctx, c.Nodes[i], arg); err != nil {
			break
		}
	}
	if err == nil {
		sleep(ctx, d)
	}
	if f.Heal != nil {
		// All at once: nodes that forget come back together, within a
		// lock's TTL, as a rack that loses power does.
		errs := make([]error, len(targets))
		var wg sync.WaitGroup
		for k, i := range targets {
			wg.Go(func() { errs[k] = f.Heal(hctx, c.Nodes[i]) })
		}
		wg.Wait()
		err = errors.Join(append(errs, err)...)
	}
	detail := ""
	if a := arg.String(); a != "" {
		detail = " (" + a + ")"
	}
	if f.Then != nil && err == nil {
		detail += ", then " + f.Then(hctx, n.quorum, n.cfg)
	}
	end := time.Now()
	n.history.AddFault(checker.Fault{Kind: f.Name, Nodes: targets, Majority: t != Minority, Start: start, End: end})
	n.logf("nemesis: %s%s on nodes %v for %v from %s", f.Name, detail, targets, end.Sub(start).Round(time.Millisecond), start.Format(clockLayout))
	return err
}

// stopProcess freezes a client process for d.
func (n *nemesis) stopProcess(ctx context.Context, f Fault, d time.Duration) error {
	if len(n.workload.procs) == 0 {
		return errors.New("no client processes to stop (Config.Processes is 0)")
	}
	p := n.workload.procs[n.rng.IntN(len(n.workload.procs))]
	start := time.Now()
	if err := p.Stop(); err != nil {
		return err
	}
	sleep(ctx, d)
	err := p.Continue()
	end := time.Now()
	n.history.AddFault(checker.Fault{Kind: f.Name, Nodes: []int{p.id}, Start: start, End: end})
	n.logf("nemesis: %s client %d for %v from %s", f.Name, p.id, end.Sub(start).Round(time.Millisecond), start.Format(clockLayout))
	return err
}

// onPaths changes the clients' paths to the nodes for d, then leads them
// back.
func (n *nemesis) onPaths(ctx context.Context, f Fault, d time.Duration) error {
	p := n.workload.paths
	if p == nil {
		return errors.New("no client paths to change (the scenario has no path fault)")
	}
	start := time.Now()
	what, nodes := f.OnPaths(ctx, n.rng, n.cfg, p, d)
	p.restore()
	end := time.Now()
	n.history.AddFault(checker.Fault{Kind: f.Name, Nodes: nodes, Start: start, End: end})
	n.logf("nemesis: %s: %s, for %v from %s", f.Name, what, end.Sub(start).Round(time.Millisecond), start.Format(clockLayout))
	return nil
}

// targets picks the nodes a fault hits.
func (n *nemesis) targets(t Targets) []int {
	nodes := len(n.quorum.Addrs())
	var k int
	switch t {
	case Minority:
		k = 1 + n.rng.IntN(max((nodes-1)/2, 1))
	case Majority:
		k = nodes/2 + 1
	case All:
		k = nodes
	}
	out := n.rng.Perm(nodes)[:k]
	slices.Sort(out)
	return out
}

// clearQuarantine runs Bootstrap with ClearQuarantine, as an operator
// does after a restart, and says whether it cleared or was refused.
func clearQuarantine(ctx context.Context, c Quorum, cfg *Config) string {
	var outcome string
	err := withLocker(c.Addrs(), cfg, func(l *redlock.Locker) error {
		err := l.Bootstrap(ctx, redlock.ClearQuarantine())
		switch {
		case err == nil:
			outcome = "cleared the quarantines"
		case errors.Is(err, redlock.ErrInvalid):
			outcome = "clearing refused: a hold lives"
		default:
			outcome = "clearing failed: " + err.Error()
		}
		return nil
	})
	if err != nil {
		return "clearing failed: " + err.Error()
	}
	return outcome
}
