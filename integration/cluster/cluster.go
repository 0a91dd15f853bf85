// Package cluster runs a set of independent Redis masters for the chaos
// suite, each behind its own TCP fault proxy in the test process
// (internal/redistest's Forwarder), and
// gives the nemesis its faults: kill, restart, pause, blackhole, lost replies,
// isolation, latency and connection resets.
//
// The servers come from a Backend: redis-server processes on loopback
// (Processes) or containers through dockertest (Containers). Clients connect
// to the proxies, never to the servers, so every network fault applies to
// them.
//
// RedisClusters and SentinelGroups are the other kinds of quorum: each node
// a Redis Cluster, or a Sentinel group, of processes, with faults of their
// own (redisfaults.go, sentinelfaults.go).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// Backend starts Redis servers.
type Backend interface {
	// Name names the backend in test output: "processes" or "containers".
	Name() string
	// Start starts one server and returns when it answers PING.
	Start(ctx context.Context, opts Options) (Server, error)
}

// Options configure a server. The zero value is a server without
// persistence. Options is comparable, so a test can keep one cluster per
// kind.
type Options struct {
	// Persistent turns on the append-only file with appendfsync always, so
	// that a killed server comes back with every write it acknowledged.
	Persistent bool
	// EverySec turns on the append-only file with appendfsync everysec:
	// a machine crash loses up to a second of acknowledged writes. It
	// excludes Persistent.
	EverySec bool
	// MaxMemory, if set, caps each server's memory ("8mb"), under the
	// noeviction policy but while an evict fault fills it under a
	// volatile-* one, so that it evicts keys with a TTL.
	MaxMemory string
	// Replicas gives each node a replica process that replicates from it,
	// for Node.Failover. Processes only.
	Replicas bool
	// Clock starts each server under the clock shim, so that its wall
	// clock can jump or run fast (Node.SetClock). Processes only.
	Clock bool
	// RedisCluster makes each node of the quorum a Redis Cluster of
	// processes (StartRedisClusters), without the other options.
	RedisCluster bool
	// Sentinel makes each node of the quorum a Sentinel group of
	// processes (StartSentinelGroups), without the other options.
	Sentinel bool
}

// String names the kind of cluster in test output.
func (o Options) String() string {
	var parts []string
	if o.Persistent {
		parts = append(parts, "aof-always")
	}
	if o.EverySec {
		parts = append(parts, "aof-everysec")
	}
	if o.MaxMemory != "" {
		parts = append(parts, "maxmemory-"+o.MaxMemory)
	}
	if o.Replicas {
		parts = append(parts, "replicas")
	}
	if o.Clock {
		parts = append(parts, "clock")
	}
	if o.RedisCluster {
		parts = append(parts, "redis-cluster")
	}
	if o.Sentinel {
		parts = append(parts, "sentinel")
	}
	if len(parts) == 0 {
		return "plain"
	}
	return strings.Join(parts, "+")
}

// validate rejects options that contradict each other.
func (o Options) validate() error {
	if o.Persistent && o.EverySec {
		return errors.New("cluster options: Persistent and EverySec exclude each other")
	}
	return nil
}

// serverArgs are the redis-server arguments the options add to a
// backend's defaults.
func (o Options) serverArgs() []string {
	var a []string
	if o.EverySec {
		a = append(a, "--appendonly", "yes", "--appendfsync", "everysec")
	}
	if o.MaxMemory != "" {
		// noeviction until the evict fault switches to a volatile-*
		// policy, and again after it: a restart guard refuses a node whose
		// policy may evict lock keys, and sees evictions by their count.
		a = append(a, "--maxmemory", o.MaxMemory, "--maxmemory-policy", "noeviction")
	}
	if o.Replicas {
		// A replica that reattaches after a failover syncs at once, not
		// after the default five seconds.
		a = append(a, "--repl-diskless-sync-delay", "0")
	}
	return a
}

// Server is one Redis server that can be killed, started again and paused.
// Its address does not change across restarts.
type Server interface {
	// Addr is where this process reaches the server.
	Addr() string
	// Kill stops the server with SIGKILL and returns when it is gone.
	Kill(ctx context.Context) error
	// Start starts a killed server again, with the same address and data
	// directory, and returns when it answers PING.
	Start(ctx context.Context) error
	// Pause freezes the server (SIGSTOP, docker pause): connections stay
	// open, nothing is answered.
	Pause(ctx context.Context) error
	// Resume undoes Pause.
	Resume(ctx context.Context) error
	// Close removes the server for good.
	Close(ctx context.Context) error
}

// Cluster is a set of Redis servers, each behind its own proxy.
type Cluster struct {
	// Nodes are the servers with their proxies, in a fixed order.
	Nodes []*Node

	backend Backend
	opts    Options
}

// Node is one server with its proxy. Its methods inject and heal faults;
// they are safe for concurrent use, but the nemesis applies one fault to a
// node at a time.
type Node struct {
	// Index is the node's position in Cluster.Nodes.
	Index int

	proxy *redistest.Forwarder
	addr  string // the proxy's listen address

	mu     sync.Mutex
	server Server // changes on Failover
	// replica replicates from server through replLink; nil without
	// Options.Replicas.
	replica  Server
	replLink *redistest.Forwarder
	killed   bool
	paused   bool
	cut      bool // proxy disabled
	// The state of the data faults (faults.go), undone by Heal.
	readonly       bool
	filled         int // filler keys written by Fill
	replicaStalled bool
	synced         aofMark
	clockMoved     bool
}

// Start starts n servers on backend (in parallel), each behind a proxy on a
// free loopback port. On failure it removes what it started.
func Start(ctx context.Context, backend Backend, n int, opts Options) (*Cluster, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{
		backend: backend,
		opts:    opts,
		Nodes:   make([]*Node, n),
	}
	servers := make([]Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = backend.Start(ctx, opts) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range servers {
			if s != nil {
				err = errors.Join(err, s.Close(context.WithoutCancel(ctx)))
			}
		}
		return nil, fmt.Errorf("starting %d %s: %w", n, backend.Name(), err)
	}
	for i, s := range servers {
		p, err := redistest.Forward(s.Addr())
		if err != nil {
			err = fmt.Errorf("starting proxy for node %d: %w", i, err)
			// Close the nodes with proxies, then the servers without.
			err = errors.Join(err, c.Close(ctx))
			for _, s := range servers[i:] {
				err = errors.Join(err, s.Close(context.WithoutCancel(ctx)))
			}
			return nil, err
		}
		// A later Reconnect binds the same port.
		c.Nodes[i] = &Node{Index: i, server: s, proxy: p, addr: p.Addr}
	}
	if opts.Replicas {
		if err := c.startReplicas(ctx); err != nil {
			return nil, errors.Join(err, c.Close(context.WithoutCancel(ctx)))
		}
	}
	return c, nil
}

// Backend returns the cluster's backend.
func (c *Cluster) Backend() Backend { return c.backend }

// Options returns the options the servers were started with.
func (c *Cluster) Options() Options { return c.opts }

// Reset heals every node and empties it (FLUSHALL, then SAVE, so that no
// older snapshot is left to reload), so the cluster can serve another run.
func (c *Cluster) Reset(ctx context.Context) error {
	if err := c.Heal(ctx); err != nil {
		return err
	}
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		errs[i] = n.direct(ctx, func(rc *redis.Client) error {
			if err := rc.FlushAll(ctx).Err(); err != nil {
				return err
			}
			return save(ctx, rc)
		})
	}
	return errors.Join(errs...)
}

// save runs SAVE, waiting while a background save (a replica's sync) is in
// progress, for up to ten seconds.
func save(ctx context.Context, rc *redis.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := rc.Save(ctx).Err()
		if err == nil || !strings.Contains(err.Error(), "in progress") {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("SAVE: %w (last error: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// Addrs returns the proxies' addresses, which clients use.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// ServerAddrs returns the servers' own addresses, past the proxies: for
// clients of a run whose faults need no proxy, which saves a hop.
func (c *Cluster) ServerAddrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Server().Addr()
	}
	return out
}

// NewClient returns a go-redis client for node i through its proxy, set up
// for lock use as the library asks: context deadlines honoured, no command
// retries.
func (c *Cluster) NewClient(i int) *redis.Client {
	return NewClient(c.Nodes[i].Addr())
}

// NewClient returns a go-redis client for addr set up for lock use: context
// deadlines honoured, no command retries, a small pool.
func NewClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		PoolSize:              4,
		Protocol:              2,
		DisableIdentity:       true,
	})
}

// Heal undoes every fault on every node: resumes, restarts, reconnects and
// clears the network faults.
func (c *Cluster) Heal(ctx context.Context) error {
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.Heal(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops the proxies and removes the servers.
func (c *Cluster) Close(ctx context.Context) error {
	var errs []error
	for _, n := range c.Nodes {
		if n == nil {
			continue
		}
		errs = append(errs, n.proxy.Close())
		errs = append(errs, n.Resume(ctx))
		errs = append(errs, n.server.Close(ctx))
		if n.replica != nil {
			errs = append(errs, n.replLink.Close())
			errs = append(errs, n.replica.Close(ctx))
		}
	}
	return errors.Join(errs...)
}

// Addr returns the proxy's address: where clients reach the node.
func (n *Node) Addr() string { return n.addr }

// Server returns the node's server (after a Failover, the promoted
// replica).
func (n *Node) Server() Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.server
}

// Kill kills the server (SIGKILL).
func (n *Node) Kill(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.killLocked(ctx)
}

// killLocked is Kill with n.mu held.
func (n *Node) killLocked(ctx context.Context) error {
	if n.paused {
		// A frozen container cannot be killed; a stopped process dies
		// either way.
		if err := n.server.Resume(ctx); err != nil {
			return err
		}
		n.paused = false
	}
	n.killed = true
	return n.server.Kill(ctx)
}

// Restart starts a killed server again (or kills it first). Without
// persistence it comes back empty.
func (n *Node) Restart(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.killed {
		if err := n.killLocked(ctx); err != nil {
			return err
		}
	}
	if err := n.server.Start(ctx); err != nil {
		return err
	}
	n.killed = false
	return nil
}

// Pause freezes the server.
func (n *Node) Pause(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.server.Pause(ctx); err != nil {
		return err
	}
	n.paused = true
	return nil
}

// Resume unfreezes the server.
func (n *Node) Resume(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.paused {
		return nil
	}
	if err := n.server.Resume(ctx); err != nil {
		return err
	}
	n.paused = false
	return nil
}

// Blackhole drops every byte in both directions on the node's connections,
// existing and new, without closing them: a network partition.
func (n *Node) Blackhole() error {
	return n.proxy.UpdateFaults(func(f *redistest.Faults) { f.Blackhole = true })
}

// DropReplies lets requests through but drops the replies: the server does
// what it is asked and the client never learns it.
func (n *Node) DropReplies() error {
	return n.proxy.UpdateFaults(func(f *redistest.Faults) { f.DropReplies = true })
}

// Latency delays every chunk of data in both directions by latency ±
// jitter. A negative latency or jitter is an error.
func (n *Node) Latency(latency, jitter time.Duration) error {
	if latency < 0 || jitter < 0 || jitter > latency {
		return fmt.Errorf("latency %v ± %v: want 0 <= jitter <= latency", latency, jitter)
	}
	return n.proxy.UpdateFaults(func(f *redistest.Faults) {
		f.RequestDelay, f.ReplyDelay, f.Jitter = latency, latency, jitter
	})
}

// ResetPeer resets (TCP RST) every connection of the node as soon as the
// client sends data, until healed.
func (n *Node) ResetPeer() error {
	return n.proxy.UpdateFaults(func(f *redistest.Faults) { f.Reset = true })
}

// Isolate disables the proxy: it closes every connection and refuses new
// ones.
func (n *Node) Isolate() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.proxy.Isolate()
	n.cut = true
}

// Reconnect re-enables a proxy disabled by Isolate, on the same port.
func (n *Node) Reconnect() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.cut {
		return nil
	}
	if err := n.proxy.Reconnect(); err != nil {
		return fmt.Errorf("re-enabling proxy %s: %w", n.addr, err)
	}
	n.cut = false
	return nil
}

// ClearNetwork removes the network faults of the node's proxy (blackhole,
// lost replies, latency, resets); Reconnect undoes Isolate.
func (n *Node) ClearNetwork() {
	// The zero Faults are valid: SetFaults cannot fail.
	_ = n.proxy.SetFaults(redistest.Faults{})
}

// Heal undoes every fault on the node.
func (n *Node) Heal(ctx context.Context) error {
	n.ClearNetwork()
	err := n.Reconnect()
	if rerr := n.Resume(ctx); rerr != nil {
		err = errors.Join(err, rerr)
	}
	n.mu.Lock()
	killed := n.killed
	n.mu.Unlock()
	if killed {
		err = errors.Join(err, n.Restart(ctx))
	}
	return errors.Join(err, n.healData(ctx))
}

// WaitReady returns when the Redis server at addr answers PING (a server
// that is loading its append-only file answers LOADING until it is done), or
// when ctx ends.
func WaitReady(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, Protocol: 2, DisableIdentity: true, PoolSize: 1,
	})
	defer c.Close()
	// A server gives no signal across the network when it becomes ready;
	// asking is the only way to know.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		if err = c.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis at %s not ready: %w (last error: %v)", addr, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
