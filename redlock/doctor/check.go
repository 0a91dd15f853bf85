package doctor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/nodeinfo"
)

// minCallTimeout is the least bound on each of Check's calls to a node: a
// slow node is to be reported as slow, not as unreachable, even under a
// short node timeout.
const minCallTimeout = time.Second

// Check asks every node whether it meets the assumptions of the safety
// model, and reports, per node and for the whole set, what it found: each
// finding with a severity (OK, Warning, Error) and a one-line fix. The
// clients are one plain *redis.Client per node, as a redlock.Locker over
// them would take; Check uses only their options (see the package doc) and
// closes every connection it opened before it returns.
//
// It takes at least the clock window (WithClockWindow). Unreachable nodes
// are findings, not errors: the error is one matching redlock.ErrInvalid
// for what redlock.New refuses (no clients, a nil client, a Sentinel
// failover client, two clients of one address) or a bad option (nothing
// is asked then), or one matching ctx.Err() when ctx ended
// before every node was asked (the report then holds what was found so
// far). It is safe to call concurrently.
func Check(ctx context.Context, clients []*redis.Client, opts ...Option) (*Report, error) {
	targets, err := nodeinfo.Servers(clients, Server)
	if err != nil {
		return nil, invalid("%w", err)
	}
	return CheckNodes(ctx, targets, opts...)
}

// CheckNodes is Check over nodes of any kind, as redlock.NewNodes takes
// them: standalone masters (Server), Redis Clusters (Cluster) and Sentinel
// groups (Sentinel), mixed. It finds each cluster's masters (its slot map)
// and each group's (its sentinels' answer), checks every such master as
// Check checks a standalone one, and reports it as a shard of its node
// (Node.Shards, Finding.Shard); it also checks each cluster's slots and
// each group's sentinels and failover settings (Slots, Sentinels,
// Failover). A quorum with a Cluster node keeps the restart guard's
// marker per hash slot, on every node: CheckNodes then reads the markers
// of every slot a master serves. One server reached through two nodes (a
// cluster's master also given as a Server, say) is an Error finding.
//
// The error is one matching redlock.ErrInvalid for no targets, a nil or
// bad target (see Server, Cluster, Sentinel), two targets that
// redlock.NewNodes counts as one node, or a bad option; or one matching
// ctx.Err(), as Check's. It is safe to call concurrently.
func CheckNodes(ctx context.Context, targets []Target, opts ...Option) (*Report, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	ps, err := plans(targets)
	if err != nil {
		return nil, err
	}
	return run(ctx, ps, &cfg)
}

// newConfig applies the options to the defaults and validates them.
func newConfig(opts []Option) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg, cfg.validate()
}

// run checks the nodes of ps: it finds their masters, asks each master,
// waits for the clock window, reads the clocks again, and assesses what
// it found.
func run(ctx context.Context, ps []plan, cfg *config) (*Report, error) {
	timeout := max(cfg.nodeTimeout, minCallTimeout)
	nodes := make([]foundNode, len(ps))
	for i := range nodes {
		nodes[i].plan = &ps[i]
	}
	probeAll(nodes, func(n *foundNode) { n.discover(ctx, cfg.nodeTimeout, timeout) })
	probes := newProbes(nodes, cfg.nodeTimeout)
	defer func() {
		for i := range probes {
			probes[i].conn.close()
		}
	}()
	probeAll(probes, func(p *nodeProbe) { p.probe(ctx, timeout) })
	if cfg.window > 0 && ctx.Err() == nil {
		t := time.NewTimer(cfg.window)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() == nil {
			probeAll(probes, func(p *nodeProbe) { p.clockRate(ctx, timeout) })
		}
	}
	reps := assemble(nodes, probes)
	rep := assess(reps, cfg, quorum.Majority(len(reps)))
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("redlock: check cut short: %w", err)
	}
	return rep, nil
}

// probeAll runs fn on every item (a node to discover, a master to ask),
// each in a goroutine of its own, and waits for them all. Every one is
// asked everything and nothing is counted or decided while they answer: a
// plain fan-out, not a quorum round.
func probeAll[T any](items []T, fn func(item *T)) {
	var wg sync.WaitGroup
	for i := range items {
		wg.Go(func() { fn(&items[i]) })
	}
	wg.Wait()
}
