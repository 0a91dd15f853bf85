package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// paths are each client's own ways to the nodes, for the faults that hit
// one client's view of the cluster and not the others' (Fault.OnPaths): a
// forwarder per client and node, in front of the node's address, which a
// fault can move, open connections and all, to another node's server (a
// proxy that follows a failover to the wrong place) or to nowhere (a
// partition of that client alone).
type paths struct {
	nodes []string                 // the addresses the paths lead to, by node
	fwd   [][]*redistest.Forwarder // [client][node]
	// nowhere is a listener that closes every connection at once: a path
	// moved there reaches no server.
	nowhere net.Listener
	wg      sync.WaitGroup
}

// newPaths starts a path for each of clients clients to each of nodes.
func newPaths(clients int, nodes []string) (p *paths, err error) {
	p = &paths{nodes: nodes}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.close())
		}
	}()
	if p.nowhere, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	p.wg.Go(func() {
		for {
			c, err := p.nowhere.Accept()
			if err != nil {
				return // closed
			}
			_ = c.Close()
		}
	})
	for range clients {
		row := make([]*redistest.Forwarder, len(nodes))
		p.fwd = append(p.fwd, row)
		for j, addr := range nodes {
			if row[j], err = redistest.Forward(addr); err != nil {
				return nil, fmt.Errorf("path to %s: %w", addr, err)
			}
		}
	}
	return p, nil
}

// addrs returns the node addresses of client i: its paths.
func (p *paths) addrs(i int) []string {
	out := make([]string, len(p.fwd[i]))
	for j, f := range p.fwd[i] {
		out[j] = f.Addr
	}
	return out
}

// clients returns how many clients have paths.
func (p *paths) clients() int { return len(p.fwd) }

// moveTo moves client i's path to node j to target, from the next command
// of each of its connections on.
func (p *paths) moveTo(i, j int, target string) { p.fwd[i][j].MoveTo(target) }

// restore leads every path back to its own node, without delay.
func (p *paths) restore() {
	for _, row := range p.fwd {
		for j, f := range row {
			f.MoveTo(p.nodes[j])
			f.SetDelay(0)
		}
	}
}

// close stops every path and the nowhere listener.
func (p *paths) close() error {
	var errs []error
	for _, row := range p.fwd {
		for _, f := range row {
			if f != nil {
				errs = append(errs, f.Close())
			}
		}
	}
	if p.nowhere != nil {
		errs = append(errs, p.nowhere.Close())
	}
	p.wg.Wait()
	return errors.Join(errs...)
}

// moveConnections moves one client's path to one node onto another node's
// server: that client's Locker then reaches one server through two of its
// nodes, over connections that learned the right server when they opened.
// The other clients' paths are untouched.
func moveConnections(ctx context.Context, rng *rand.Rand, _ *Config, p *paths, d time.Duration) (what string, nodes []int) {
	i := rng.IntN(p.clients())
	perm := rng.Perm(len(p.nodes))
	from, to := perm[0], perm[1]
	p.moveTo(i, from, p.nodes[to])
	sleep(ctx, d)
	return fmt.Sprintf("client %d's node %d moved to node %d's server", i, from, to), []int{from, to}
}

// partialPartition cuts every client off from a minority of the nodes of
// its own, no two clients the same (as far as there are minorities to go
// round): the clients see different majorities.
func partialPartition(ctx context.Context, rng *rand.Rand, _ *Config, p *paths, d time.Duration) (what string, nodes []int) {
	n := len(p.nodes)
	var minorities [][]int
	for mask := 1; mask < 1<<n; mask++ {
		var set []int
		for j := range n {
			if mask&(1<<j) != 0 {
				set = append(set, j)
			}
		}
		if len(set) <= (n-1)/2 {
			minorities = append(minorities, set)
		}
	}
	rng.Shuffle(len(minorities), func(a, b int) { minorities[a], minorities[b] = minorities[b], minorities[a] })
	var cut []string
	hit := map[int]bool{}
	for i := range p.clients() {
		set := minorities[i%len(minorities)]
		for _, j := range set {
			p.moveTo(i, j, p.nowhere.Addr().String())
			hit[j] = true
		}
		cut = append(cut, fmt.Sprintf("client %d from %v", i, set))
	}
	sleep(ctx, d)
	for j := range hit {
		nodes = append(nodes, j)
	}
	slices.Sort(nodes)
	return fmt.Sprint(cut), nodes
}

// slowReplies delays the replies of a minority of the nodes to every
// client, on and off for d: by one delay between the node timeout and
// three times it, switched on or off every half node timeout to two node
// timeouts. The commands take effect on the servers at once, and their
// replies reach the clients after the round that sent them was decided,
// often after the clients' next commands to those nodes took effect too;
// once the delay is off, the next call is on time.
func slowReplies(ctx context.Context, rng *rand.Rand, cfg *Config, p *paths, d time.Duration) (what string, nodes []int) {
	n := len(p.nodes)
	nodes = rng.Perm(n)[:1+rng.IntN(max((n-1)/2, 1))]
	slices.Sort(nodes)
	delay := between(rng, cfg.NodeTimeout/2, cfg.NodeTimeout*6/5)
	set := func(d time.Duration) {
		for _, row := range p.fwd {
			for _, j := range nodes {
				row[j].SetDelay(d)
			}
		}
	}
	end := time.Now().Add(d)
	flips := 0
	for on := true; ; on = !on {
		if on {
			set(delay)
		} else {
			set(0)
		}
		flips++
		left := time.Until(end)
		if left <= 0 || !sleep(ctx, min(left, between(rng, cfg.NodeTimeout/2, 2*cfg.NodeTimeout))) {
			break
		}
	}
	return fmt.Sprintf("replies from nodes %v %v late, on and off (%d changes)", nodes, delay.Round(time.Millisecond), flips), nodes
}
