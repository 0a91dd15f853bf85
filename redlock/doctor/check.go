package doctor

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
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
// for no clients, a nil client, two clients of one address, or a bad
// option (nothing is asked then), or one matching ctx.Err() when ctx ended
// before every node was asked (the report then holds what was found so
// far). It is safe to call concurrently.
func Check(ctx context.Context, clients []*redis.Client, opts ...Option) (*Report, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	conns, addrs, err := nodeConns(clients, cfg.nodeTimeout)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	timeout := max(cfg.nodeTimeout, minCallTimeout)
	probes := make([]nodeProbe, len(conns))
	for i := range probes {
		probes[i].rep.Addr, probes[i].conn = addrs[i], conns[i]
	}
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
	nodes := make([]Node, len(probes))
	for i := range probes {
		nodes[i] = probes[i].rep
	}
	rep := assess(nodes, &cfg, quorum.Majority(len(nodes)))
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("redlock: check cut short: %w", err)
	}
	return rep, nil
}

// probeAll runs fn on every probe, each in a goroutine of its own, and
// waits for them all. Every node is asked everything and nothing is
// counted or decided while they answer: a plain fan-out, not a quorum
// round.
func probeAll(probes []nodeProbe, fn func(p *nodeProbe)) {
	var wg sync.WaitGroup
	for i := range probes {
		wg.Go(func() { fn(&probes[i]) })
	}
	wg.Wait()
}

// nodeConns checks the clients as redlock.New does and returns the
// checker's own client for each, with the nodes' addresses, or an error
// matching redlock.ErrInvalid.
func nodeConns(clients []*redis.Client, nodeTimeout time.Duration) ([]*nodeConn, []string, error) {
	if len(clients) == 0 {
		return nil, nil, invalid("no clients")
	}
	conns := make([]*nodeConn, len(clients))
	addrs := make([]string, len(clients))
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, nil, invalid("client %d is nil", i)
		}
		for j := range i {
			if clients[j] == c {
				return nil, nil, invalid("clients %d and %d are the same client: it would vote twice", j, i)
			}
		}
		o := c.Options()
		addr, key := nodeAddr(o, i)
		if j, dup := seen[key]; dup && key != "" {
			return nil, nil, invalid("clients %d and %d are the same node (%s): it would vote twice", j, i, addr)
		}
		seen[key] = i
		conns[i], addrs[i] = newNodeConn(o, nodeTimeout), addr
	}
	return conns, addrs, nil
}
