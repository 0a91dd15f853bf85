package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// ClusterOptions configure a Redis Cluster (StartCluster).
type ClusterOptions struct {
	// Masters is the number of masters, each owning an equal range of
	// slots; 3 by default.
	Masters int
	// Replicas is the number of replicas of each master; none by default.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a node may stay silent
	// before the others count it as failed, and a replica of a failed
	// master takes over; 5s by default.
	NodeTimeout time.Duration
	// Server are every node's server options (Persistent, Binary, Args,
	// Env). Dir must be empty: each node gets a temporary directory.
	Server Options
}

// ClusterNode is one redis-server of a cluster. Kill, Restart, Pause and
// Resume are the Server's: a restarted node keeps its ID, ports and slots
// (its nodes.conf stays in its directory), and without persistence none
// of its keys.
type ClusterNode struct {
	*Server
	// ID is the node's cluster node ID.
	ID string
}

// Cluster is a Redis Cluster of redis-server processes on loopback, each
// with its client port and cluster-bus port reserved outside the kernel's
// ephemeral range. Its methods are safe for concurrent use; the ones that
// wait ask only the nodes that run and are not paused.
type Cluster struct {
	// Nodes are the cluster's servers as started: first the masters, Nodes[i]
	// with the i-th of equal slot ranges, then the replicas of Nodes[0],
	// those of Nodes[1], and so on. Failovers change who is master, not
	// this order.
	Nodes []*ClusterNode

	masters int
}

// StartClusterT starts a cluster for a test (StartCluster) and closes it at
// cleanup. Failures end the test.
func StartClusterT(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing the cluster: %v", err)
		}
	})
	return c
}

// StartCluster starts the servers, gives each master its slot range,
// introduces the nodes to each other (CLUSTER MEET), attaches the replicas
// (CLUSTER REPLICATE), and waits until every node says cluster_state:ok,
// every node sees the same masters, replicas and slots, and every replica
// has synchronised with its master. On failure, or when ctx ends first, it
// stops whatever it started.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	if opts.Masters == 0 {
		opts.Masters = 3
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = 5 * time.Second
	}
	switch {
	case opts.Masters < 1 || opts.Masters > Slots:
		return nil, fmt.Errorf("redistest: a cluster of %d masters", opts.Masters)
	case opts.Replicas < 0:
		return nil, fmt.Errorf("redistest: %d replicas per master", opts.Replicas)
	case opts.NodeTimeout < time.Millisecond:
		return nil, fmt.Errorf("redistest: cluster node timeout %v", opts.NodeTimeout)
	case opts.Server.Dir != "":
		return nil, errors.New("redistest: cluster nodes get directories of their own; leave Dir empty")
	}
	o := opts.Server
	o.configFile = "redis.conf"
	o.config = strings.Join([]string{
		"cluster-enabled yes",
		"cluster-config-file nodes.conf",
		"cluster-node-timeout " + strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10),
		// Replicas stay with the master they were given.
		"cluster-allow-replica-migration no",
		// A master waits 5s by default before a diskless full sync, for
		// more replicas to share it.
		"repl-diskless-sync-delay 0",
		"",
	}, "\n")
	o.bus = true
	total := opts.Masters * (1 + opts.Replicas)
	servers, err := startAll(total, o)
	if err != nil {
		return nil, err
	}
	c := &Cluster{masters: opts.Masters}
	for _, s := range servers {
		c.Nodes = append(c.Nodes, &ClusterNode{Server: s})
	}
	if err := c.form(ctx, opts.Replicas); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// startAll starts n servers at once; on failure it stops those started.
func startAll(n int, o Options) ([]*Server, error) {
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = Start(o) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range servers {
			if s != nil {
				err = errors.Join(err, s.Close())
			}
		}
		return nil, err
	}
	return servers, nil
}

// form makes one cluster of c's fresh nodes.
func (c *Cluster) form(ctx context.Context, replicas int) error {
	clients := make([]*redis.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = n.NewClient()
	}
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	for i, n := range c.Nodes {
		id, err := clients[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER MYID on %s: %w", n.Addr, err)
		}
		n.ID = id
		// Distinct epochs from the start, as redis-cli --cluster create
		// gives them: no collision for the nodes to settle first.
		if err := clients[i].Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("redistest: CLUSTER SET-CONFIG-EPOCH on %s: %w", n.Addr, err)
		}
	}
	for i := range c.masters {
		lo, hi := i*Slots/c.masters, (i+1)*Slots/c.masters-1
		if err := clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("redistest: CLUSTER ADDSLOTSRANGE %d %d on %s: %w", lo, hi, c.Nodes[i].Addr, err)
		}
	}
	// Every node meets every other itself, rather than through gossip: a
	// node learns another's slots only from that node, and gossip alone
	// left a master 1-3 s more in cluster_state:fail.
	for i := range c.Nodes {
		for _, other := range c.Nodes[i+1:] {
			if err := clients[i].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", other.Port, other.BusPort).Err(); err != nil {
				return fmt.Errorf("redistest: CLUSTER MEET on %s: %w", c.Nodes[i].Addr, err)
			}
		}
	}
	// A node can replicate only a master it knows.
	if err := c.await(ctx, "every node knows every other", func(v []view) error {
		for _, w := range v {
			// A node in handshake is listed under a random name.
			for _, n := range c.Nodes {
				if _, ok := w.nodes[n.ID]; !ok {
					return fmt.Errorf("%s does not know node %s yet", w.addr, n.ID)
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for r := range replicas {
		for m := range c.masters {
			i := c.masters + m*replicas + r
			if err := clients[i].Do(ctx, "CLUSTER", "REPLICATE", c.Nodes[m].ID).Err(); err != nil {
				return fmt.Errorf("redistest: CLUSTER REPLICATE on %s: %w", c.Nodes[i].Addr, err)
			}
			// The others learn of a node's new role from that node only,
			// at their next ping to it (up to half the node timeout): a
			// meeting again tells them at once, then ends as a duplicate.
			for _, other := range c.Nodes {
				if other == c.Nodes[i] {
					continue
				}
				if err := clients[i].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", other.Port, other.BusPort).Err(); err != nil {
					return fmt.Errorf("redistest: CLUSTER MEET on %s: %w", c.Nodes[i].Addr, err)
				}
			}
		}
	}
	want := make(map[string]string, len(c.Nodes))
	for i, n := range c.Nodes {
		want[n.ID] = ""
		if i >= c.masters {
			want[n.ID] = c.Nodes[(i-c.masters)/replicas].ID
		}
	}
	return c.await(ctx, "the cluster is formed", func(v []view) error {
		if err := agreed(v, true, false); err != nil {
			return err
		}
		for id, master := range want {
			if got := v[0].nodes[id].master; got != master {
				return fmt.Errorf("node %s has master %q, want %q", id, got, master)
			}
		}
		return c.replicasSynced(ctx, v)
	})
}

// replicasSynced fails unless every answering replica's link to its
// master is up.
func (c *Cluster) replicasSynced(ctx context.Context, v []view) error {
	for _, w := range v {
		if w.nodes[w.id].master == "" {
			continue
		}
		cl := newClient(w.addr)
		link, err := infoString(ctx, cl, "master_link_status")
		_ = cl.Close()
		if err != nil || link != "up" {
			return fmt.Errorf("replica %s: master link %q (%v)", w.addr, link, err)
		}
	}
	return nil
}

// Close stops every node, removes their directories and releases their
// ports.
func (c *Cluster) Close() error {
	var err error
	for _, n := range c.Nodes {
		err = errors.Join(err, n.Close())
	}
	return err
}

// Addrs are the addresses of every node.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// NewClusterClient returns a go-redis cluster client that knows every
// node, with context deadlines honoured and go-redis's default redirect
// following. The caller closes it.
func (c *Cluster) NewClusterClient() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		Protocol:              2,
		DisableIdentity:       true,
	})
}

// ClusterClientT returns NewClusterClient's client, closed at cleanup.
func (c *Cluster) ClusterClientT(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cl := c.NewClusterClient()
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// Node returns the node with cluster ID id, or nil.
func (c *Cluster) Node(id string) *ClusterNode {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// KeySlot returns key's hash slot, as the cluster computes it (CLUSTER
// KEYSLOT on a node that answers).
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	var err error
	for _, n := range c.Nodes {
		if !n.answering() {
			continue
		}
		cl := n.NewClient()
		var slot int64
		slot, err = cl.ClusterKeySlot(ctx, key).Result()
		_ = cl.Close()
		if err == nil {
			return int(slot), nil
		}
	}
	return 0, fmt.Errorf("redistest: no node tells the slot of a key: %w", err)
}

// Topology is what the cluster's nodes agree on: each slot's master and
// each node's role.
type Topology struct {
	// Owner holds each slot's master; nil for a slot nobody serves.
	Owner [Slots]*ClusterNode
	// MasterOf maps each replica to its master; masters are not in it.
	MasterOf map[*ClusterNode]*ClusterNode
}

// Masters are the nodes that own slots, in the order of Nodes.
func (tp *Topology) Masters() []*ClusterNode {
	var ms []*ClusterNode
	for _, o := range tp.Owner {
		if o != nil && !slices.Contains(ms, o) {
			ms = append(ms, o)
		}
	}
	return ms
}

// Replicas are master's replicas.
func (tp *Topology) Replicas(master *ClusterNode) []*ClusterNode {
	var rs []*ClusterNode
	for r, m := range tp.MasterOf {
		if m == master {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b *ClusterNode) int { return a.Port - b.Port })
	return rs
}

// Topology waits until every answering node has the same view of the
// cluster, slots and roles (not necessarily cluster_state:ok), and returns
// it.
func (c *Cluster) Topology(ctx context.Context) (*Topology, error) {
	return c.topologyAgreed(ctx, false)
}

// topologyAgreed is Topology; with slotsOnly the nodes need only agree on
// the slots' masters (agreed), and MasterOf is one node's view.
func (c *Cluster) topologyAgreed(ctx context.Context, slotsOnly bool) (*Topology, error) {
	var tp *Topology
	err := c.await(ctx, "the nodes agree", func(v []view) error {
		if err := agreed(v, false, slotsOnly); err != nil {
			return err
		}
		var err error
		tp, err = c.topology(v[0])
		return err
	})
	return tp, err
}

// AwaitReady waits until every answering node says cluster_state:ok and
// all of them have the same view of the cluster, slots and roles.
func (c *Cluster) AwaitReady(ctx context.Context) error {
	return c.await(ctx, "the cluster is ready", func(v []view) error { return agreed(v, true, false) })
}

// SlotOwner returns the master that owns slot, once every answering node
// agrees on every slot's master.
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (*ClusterNode, error) {
	if slot < 0 || slot >= Slots {
		return nil, fmt.Errorf("redistest: no slot %d", slot)
	}
	tp, err := c.topologyAgreed(ctx, true)
	if err != nil {
		return nil, err
	}
	if tp.Owner[slot] == nil {
		return nil, fmt.Errorf("redistest: no master owns slot %d", slot)
	}
	return tp.Owner[slot], nil
}

// KeyOwner returns the master that owns key's slot.
func (c *Cluster) KeyOwner(ctx context.Context, key string) (*ClusterNode, error) {
	slot, err := c.KeySlot(ctx, key)
	if err != nil {
		return nil, err
	}
	return c.SlotOwner(ctx, slot)
}

// FlushShard deletes every key of master and, through replication, of
// its replicas (FLUSHALL SYNC): a shard that lost its memory.
func (c *Cluster) FlushShard(ctx context.Context, master *ClusterNode) error {
	cl := master.NewClient()
	defer cl.Close()
	if err := cl.Do(ctx, "FLUSHALL", "SYNC").Err(); err != nil {
		return fmt.Errorf("redistest: FLUSHALL on %s: %w", master.Addr, err)
	}
	return nil
}

// view is one node's CLUSTER NODES and CLUSTER INFO.
type view struct {
	addr  string
	id    string // the node's own ID
	ok    bool   // cluster_state:ok
	nodes map[string]nodeLine
}

// nodeLine is what a CLUSTER NODES line says of a node, less what only
// its own node or its link state shows.
type nodeLine struct {
	master string // the master's ID for a replica, "" for a master
	slots  string // the slot ranges, as listed
}

// views asks every answering node for its view.
func (c *Cluster) views(ctx context.Context) ([]view, error) {
	var vs []view
	for _, n := range c.Nodes {
		if !n.answering() {
			continue
		}
		v, err := nodeView(ctx, n.Server)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	if len(vs) == 0 {
		return nil, errors.New("no node answers")
	}
	return vs, nil
}

func nodeView(ctx context.Context, s *Server) (view, error) {
	cl := s.NewClient()
	defer cl.Close()
	v := view{addr: s.Addr, nodes: map[string]nodeLine{}}
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return v, fmt.Errorf("CLUSTER INFO on %s: %w", s.Addr, err)
	}
	v.ok = strings.Contains(info, "cluster_state:ok")
	text, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return v, fmt.Errorf("CLUSTER NODES on %s: %w", s.Addr, err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return v, fmt.Errorf("CLUSTER NODES on %s: line %q", s.Addr, line)
		}
		flags := strings.Split(f[2], ",")
		if slices.Contains(flags, "myself") {
			v.id = f[0]
		}
		nl := nodeLine{}
		if slices.Contains(flags, "slave") {
			nl.master = f[3]
		}
		var slots []string
		for _, r := range f[8:] {
			if !strings.HasPrefix(r, "[") { // a migration in progress: only its own node shows it
				slots = append(slots, r)
			}
		}
		nl.slots = strings.Join(slots, " ")
		v.nodes[f[0]] = nl
	}
	return v, nil
}

// agreed fails unless every view is the same (and, with ok, every node
// says cluster_state:ok). With slotsOnly, the views need only agree on
// the slots' masters: a node hears of another's change of role only from
// that node itself, up to half the node timeout later.
func agreed(v []view, ok, slotsOnly bool) error {
	for _, w := range v {
		if ok && !w.ok {
			return fmt.Errorf("%s: cluster_state is not ok", w.addr)
		}
		if len(w.nodes) != len(v[0].nodes) {
			return fmt.Errorf("%s knows %d nodes, %s %d", w.addr, len(w.nodes), v[0].addr, len(v[0].nodes))
		}
		for id, nl := range v[0].nodes {
			got := w.nodes[id]
			if slotsOnly {
				got.master, nl.master = "", ""
			}
			if got != nl {
				return fmt.Errorf("%s sees node %s as %+v, %s as %+v", w.addr, id, got, v[0].addr, nl)
			}
		}
	}
	return nil
}

// topology turns a view into a Topology.
func (c *Cluster) topology(v view) (*Topology, error) {
	tp := &Topology{MasterOf: map[*ClusterNode]*ClusterNode{}}
	for id, nl := range v.nodes {
		n := c.Node(id)
		if n == nil {
			return nil, fmt.Errorf("%s knows node %s, not one of ours", v.addr, id)
		}
		if nl.master != "" {
			m := c.Node(nl.master)
			if m == nil {
				return nil, fmt.Errorf("%s knows master %s, not one of ours", v.addr, nl.master)
			}
			tp.MasterOf[n] = m
		}
		for r := range strings.FieldsSeq(nl.slots) {
			lo, hi, err := slotRange(r)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", v.addr, err)
			}
			for s := lo; s <= hi; s++ {
				tp.Owner[s] = n
			}
		}
	}
	return tp, nil
}

// slotRange parses "lo-hi" or "slot".
func slotRange(r string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(r, "-")
	if lo, err = strconv.Atoi(a); err == nil {
		hi = lo
		if isRange {
			hi, err = strconv.Atoi(b)
		}
	}
	if err != nil || lo < 0 || hi < lo || hi >= Slots {
		return 0, 0, fmt.Errorf("slot range %q", r)
	}
	return lo, hi, nil
}

// await polls the answering nodes' views until cond accepts them, or ctx
// ends; its error then says what was awaited and the last reason.
func (c *Cluster) await(ctx context.Context, what string, cond func([]view) error) error {
	return poll(ctx, what, func() error {
		v, err := c.views(ctx)
		if err != nil {
			return err
		}
		return cond(v)
	})
}

// poll calls cond every 10ms until it returns nil, or ctx ends; its error
// then says what was awaited and cond's last error.
func poll(ctx context.Context, what string, cond func() error) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: waiting until %s: %w (%w)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
