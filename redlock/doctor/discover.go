package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// foundNode is one node and the masters that vote for it: a standalone
// node's own server, a cluster's masters by its slot map, a Sentinel
// group's master as its sentinels name it.
type foundNode struct {
	plan    *plan
	rep     Node // a Cluster's or Sentinel group's own entry
	masters []master
}

// master is one server to ask: its address, the options of its clients
// and, on a cluster, the slots it serves (ascending).
type master struct {
	addr  string
	opts  *redis.Options
	slots []int
}

// discover finds the node's masters; a node whose masters cannot be found
// keeps the reason in rep.Err, and has none.
func (n *foundNode) discover(ctx context.Context, nodeTimeout, timeout time.Duration) {
	p := n.plan
	n.rep = Node{Addr: p.addr, Kind: p.kind, MaxMemory: -1, UsedMemory: -1, EvictedKeys: -1, MinReplicasToWrite: -1, MinReplicasMaxLag: -1}
	switch p.kind {
	case KindServer:
		n.masters = []master{{addr: p.addr, opts: p.server}}
	case KindCluster:
		slots, err := clusterSlots(ctx, p.cluster, nodeTimeout, timeout)
		if err != nil {
			n.rep.Err = err
			return
		}
		n.masters, n.rep.Slots = clusterMasters(p.cluster, slots)
	case KindSentinel:
		n.rep.Sentinels = askSentinels(ctx, p.sentinel, nodeTimeout, timeout)
		addr, err := namedMaster(n.rep.Sentinels)
		if err != nil {
			n.rep.Err = err
			return
		}
		n.masters = []master{{addr: addr, opts: conn.SentinelMasterOptions(p.sentinel, addr)}}
	}
}

// ask runs fn on a client of the checker's own, made from o, connected
// within the node timeout and closed before it returns; each of fn's
// calls is bounded by timeout.
func ask(ctx context.Context, o *redis.Options, nodeTimeout, timeout time.Duration, fn func(ctx context.Context, c *redis.Client) error) error {
	nc := newNodeConn(o, nodeTimeout)
	defer nc.close()
	if err := nc.connect(ctx); err != nil {
		return err
	}
	return checkCall(ctx, timeout, func(ctx context.Context) error { return fn(ctx, nc.client) })
}

// clusterSlots reads the cluster's slot map: with o.ClusterSlots when set
// (as the Locker does), else with CLUSTER SLOTS from each seed in turn
// until one answers.
func clusterSlots(ctx context.Context, o *redis.ClusterOptions, nodeTimeout, timeout time.Duration) ([]redis.ClusterSlot, error) {
	if o.ClusterSlots != nil {
		var slots []redis.ClusterSlot
		err := checkCall(ctx, timeout, func(ctx context.Context) error {
			var err error
			slots, err = o.ClusterSlots(ctx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("the slot map (ClusterOptions.ClusterSlots): %w", err)
		}
		return slots, nil
	}
	var errs []error
	for _, seed := range o.Addrs {
		var slots []redis.ClusterSlot
		err := ask(ctx, conn.MasterOptions(o, seed), nodeTimeout, timeout, func(ctx context.Context, c *redis.Client) error {
			var err error
			slots, err = c.ClusterSlots(ctx).Result() //lint:ignore SA1019 the Locker reads this one (conn.Cluster)
			return err
		})
		if err == nil && len(slots) > 0 {
			return slots, nil
		}
		if err == nil {
			err = errors.New("no slot is served")
		}
		addr, _, _ := conn.NodeAddr(conn.MasterOptions(o, seed))
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return nil, fmt.Errorf("cannot read the slot map (CLUSTER SLOTS): %w", errors.Join(errs...))
}

// clusterMasters groups the slot map's slots by master, the masters in
// the order of their first slots, and counts the slots served.
func clusterMasters(o *redis.ClusterOptions, slots []redis.ClusterSlot) (masters []master, served int) {
	slices.SortFunc(slots, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
	byAddr := map[string]int{}
	var seen [wire.Slots]bool
	for _, s := range slots {
		if len(s.Nodes) == 0 || s.Start < 0 || s.End >= wire.Slots || s.Start > s.End {
			continue
		}
		addr := s.Nodes[0].Addr
		i, ok := byAddr[addr]
		if !ok {
			i = len(masters)
			byAddr[addr] = i
			masters = append(masters, master{addr: addr, opts: conn.MasterOptions(o, addr)})
		}
		for slot := s.Start; slot <= s.End; slot++ {
			if !seen[slot] {
				seen[slot] = true
				served++
				masters[i].slots = append(masters[i].slots, slot)
			}
		}
	}
	return masters, served
}

// askSentinels asks every sentinel, one after the other, which master it
// names for the group.
func askSentinels(ctx context.Context, o *redis.FailoverOptions, nodeTimeout, timeout time.Duration) []SentinelAnswer {
	out := make([]SentinelAnswer, len(o.SentinelAddrs))
	for i, a := range o.SentinelAddrs {
		so := conn.SentinelOptions(o, a)
		out[i].Addr, _, _ = conn.NodeAddr(so)
		out[i].Err = ask(ctx, so, nodeTimeout, timeout, func(ctx context.Context, c *redis.Client) error {
			hp, err := c.Do(ctx, "sentinel", "get-master-addr-by-name", o.MasterName).StringSlice()
			switch {
			case errors.Is(err, redis.Nil):
				return fmt.Errorf("it watches no master named %q", o.MasterName)
			case err != nil:
				return err
			case len(hp) != 2:
				return fmt.Errorf("it named %q, not a host and port", hp)
			}
			out[i].Master = net.JoinHostPort(hp[0], hp[1])
			return nil
		})
	}
	return out
}

// namedMaster is the master that most sentinels name (the first named of
// those named equally often), or why none was named.
func namedMaster(answers []SentinelAnswer) (string, error) {
	count := map[string]int{}
	best := ""
	var errs []error
	for _, a := range answers {
		if a.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.Addr, a.Err))
			continue
		}
		if count[a.Master]++; best == "" || count[a.Master] > count[best] {
			best = a.Master
		}
	}
	if best == "" {
		return "", fmt.Errorf("no sentinel names the master: %w", errors.Join(errs...))
	}
	return best, nil
}

// newProbes makes a probe of every master found, with the clients of its
// own. A quorum with a cluster keeps the restart guard's keys per slot on
// every node (see wire.Layout): each master's probe then reads those of
// the slots it serves, all of them on a node that is no cluster.
func newProbes(nodes []foundNode, nodeTimeout time.Duration) []nodeProbe {
	perSlot := slices.ContainsFunc(nodes, func(n foundNode) bool { return n.plan.kind == KindCluster })
	var all []int
	if perSlot {
		all = make([]int, wire.Slots)
		for i := range all {
			all[i] = i
		}
	}
	var probes []nodeProbe
	for i := range nodes {
		n := &nodes[i]
		for _, m := range n.masters {
			p := nodeProbe{conn: newNodeConn(m.opts, nodeTimeout), kind: n.plan.kind, slots: m.slots}
			p.rep.Addr, p.rep.Kind, p.rep.Slots = m.addr, n.plan.kind, len(m.slots)
			if p.guardSlots = m.slots; perSlot && n.plan.kind != KindCluster {
				p.guardSlots = all
			}
			probes = append(probes, p)
		}
	}
	return probes
}

// assemble makes the report's nodes: a standalone node's facts are its
// master's; a cluster's or group's masters are its shards.
func assemble(nodes []foundNode, probes []nodeProbe) []Node {
	out := make([]Node, len(nodes))
	next := 0
	for i := range nodes {
		n := &nodes[i]
		reps := make([]Node, len(n.masters))
		for j := range reps {
			reps[j] = probes[next].rep
			next++
		}
		if n.plan.kind == KindServer {
			out[i] = reps[0]
			continue
		}
		out[i] = n.rep
		out[i].Shards = reps
	}
	return out
}
