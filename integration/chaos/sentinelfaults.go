package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/integration/cluster"
)

// sentinelGroups is the kind of quorum of the Sentinel scenarios: three
// Sentinel groups (cluster.SentinelGroups) of a master, two replicas (one
// never promoted) and three sentinels, with min-replicas-to-write 1.
var sentinelGroups = cluster.Options{Sentinel: true}

// SentinelScenarios are the runs on Sentinel group nodes (Quorum of
// cluster.SentinelGroups), in order. Their faults are the Sentinel faults
// of the catalogue (Faults), each on one group (on a majority of them
// at once with Majority).
var SentinelScenarios = []Scenario{
	// The sentinels fail masters over, now and then to a replica that
	// missed the master's last writes: the promoted replica forgets
	// locks, so the restart guard keeps it out of every vote for the
	// maximum TTL (it has a run_id of its own), while the demoted master,
	// still a master for a while, must get no vote of a Locker that has
	// heard of the switch. The fencing counters may be lost with the
	// rest (fences still grow under the guard).
	{Name: "sentinel-failover-guarded", Cluster: sentinelGroups, Guard: true, Asserted: true, CountersLost: true, CalmTTLs: 1,
		Faults: []string{"sentinel-failover", "sentinel-failover-lost-writes"}},
	// Lost writes on two groups of three at once, with 4s locks and more
	// long holds, so that locks granted while the replicas lagged are
	// still held after the failovers: the guard must keep both promoted
	// replicas out (long runs only).
	{Name: "sentinel-lost-writes-guarded", Cluster: sentinelGroups, Guard: true, Asserted: true, LongOnly: true, CountersLost: true, Majority: true, CalmTTLs: 1, LongHolds: 0.05, TTL: 4 * time.Second,
		Faults: []string{"sentinel-failover-lost-writes"}},
	// The same without the guard, as the unguarded restarts of
	// standalone nodes: outside the claims, not asserted; a long run
	// should show violations.
	{Name: "sentinel-lost-writes-unguarded", Cluster: sentinelGroups, CountersLost: true, Majority: true, CalmTTLs: 1, LongHolds: 0.05, TTL: 4 * time.Second,
		Faults: []string{"sentinel-failover-lost-writes"}},
}

// sentinelFault is where a fault of Sentinel group nodes acts: group node
// of sg. run is the run's context, which cuts a fault's waits short.
type sentinelFault struct {
	sg   *cluster.SentinelGroups
	node int
	run  context.Context
}

// wait returns a wait of d, cut short when the run ends.
func (sf sentinelFault) wait(d time.Duration) func() {
	return func() { sleep(sf.run, d) }
}

// onSentinels injects a fault of Sentinel group nodes on a minority of the
// groups (a majority with Scenario.Majority), on all of them at once.
func (n *nemesis) onSentinels(ctx context.Context, f Fault, d time.Duration) error {
	sg, ok := n.quorum.(*cluster.SentinelGroups)
	if !ok {
		return fmt.Errorf("a fault of Sentinel group nodes on %v nodes", n.quorum.Options())
	}
	return n.onGroups(ctx, f, "group", false, func(hctx context.Context, i int, _ string, _ *rand.Rand) (string, error) {
		return f.OnSentinel(hctx, sentinelFault{sg: sg, node: i, run: ctx}, d)
	})
}

func sentinelFailover(ctx context.Context, sf sentinelFault, d time.Duration) (string, error) {
	return sf.sg.Failover(ctx, sf.node, sf.wait(d))
}

func sentinelFailoverLosingWrites(ctx context.Context, sf sentinelFault, d time.Duration) (string, error) {
	return sf.sg.FailoverLosingWrites(ctx, sf.node, sf.wait(d))
}
