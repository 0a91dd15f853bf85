package conn

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// A Redis Cluster as one node: each call goes to the master that owns its
// keys' slot (all of a call's keys share one, see wire.Layout), through a
// Pipe of that master's, so a cluster's calls are batched, identified and
// guarded exactly as a standalone master's. The slot map is read with
// CLUSTER SLOTS on the link's own connections. A call is sent once, to the
// master the map names: a redirect (MOVED, ASK, TRYAGAIN, CLUSTERDOWN) is
// the node's failed vote for that call, and makes the link read the map
// again, for later calls. Never following a redirect keeps one vote per
// node: a call cannot run on two masters.
const (
	// refreshGap is the least time between two readings of the slot map:
	// a burst of redirects reads it once.
	refreshGap = 50 * time.Millisecond
	// refreshEvery reads the map even with no redirect seen, to notice
	// new masters (a failover whose old master stays silent).
	refreshEvery = 5 * time.Second
)

// Cluster is the link of a Redis Cluster node.
type Cluster struct {
	// masterPipes are the masters' pipes, kept until Close (a call may
	// still be on its way to one the map no longer names); its mu also
	// guards pending.
	masterPipes
	opts  *redis.ClusterOptions
	setup time.Duration

	table atomic.Pointer[slotTable]
	// sub is the release subscription's client: a classic PUBLISH reaches
	// the subscribers of every node of a cluster, so one master will do.
	sub *redis.Client

	// pending are the calls made before the first map was read.
	pending []*Call
	kick    chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup
}

// slotTable is a reading of the slot map: each slot's master, nil where
// none serves it.
type slotTable [wire.Slots]*Pipe

// NewCluster returns the link of the cluster that opts reach (their Addrs
// are where the map is read first), with the Locker's node timeout, the
// route of go-redis's lines and the node's identity handle, which every
// master's pipe shares: a master reached by two nodes fails the second
// one's calls. It does no I/O; the map is read at the first call.
func NewCluster(opts *redis.ClusterOptions, timeout time.Duration, route *Route, ident *Identity) *Cluster {
	cl := &Cluster{
		masterPipes: newMasterPipes(timeout, route, ident),
		opts:        opts, setup: max(opts.DialTimeout, timeout),
		kick: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	_, sub := ClientOptions(MasterOptions(opts, opts.Addrs[0]), timeout)
	sub.ReadTimeout = cl.setup
	sub.Dialer = cl.anyMaster(routeDial(sub.Dialer, route))
	cl.sub = redis.NewClient(sub)
	cl.wg.Add(1)
	go cl.refresher()
	return cl
}

// anyMaster returns a dialer of the first node that answers among the
// masters the map named and the seeds: the release subscription's. A
// classic PUBLISH reaches the subscribers of every node of a cluster, so
// any node will do, and one that is down is passed over.
func (cl *Cluster) anyMaster(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		cl.mu.Lock()
		addrs := make([]string, 0, len(cl.pipes)+len(cl.opts.Addrs))
		for a := range cl.pipes {
			addrs = append(addrs, a)
		}
		cl.mu.Unlock()
		addrs = append(addrs, cl.opts.Addrs...)
		var errs []error
		for _, a := range addrs {
			c, err := dial(ctx, network, a)
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		return nil, errors.Join(errs...)
	}
}

// Start sends c to the master of its keys' slot in the last map read; a
// call made before any map was read waits for the first.
func (cl *Cluster) Start(c *Call, inline bool) {
	t := cl.table.Load()
	if t == nil {
		cl.mu.Lock()
		if t = cl.table.Load(); t == nil {
			cl.pending = append(cl.pending, c)
			cl.mu.Unlock()
			cl.refresh()
			return
		}
		cl.mu.Unlock()
	}
	p := t[wire.Slot(c.Keys[0])]
	if p == nil {
		cl.refresh()
		c.fail(errNoSlotOwner)
		return
	}
	p.Start(c, inline)
}

// refresh asks for a new reading of the map, without waiting for it.
func (cl *Cluster) refresh() {
	select {
	case cl.kick <- struct{}{}:
	default:
	}
}

// refresher reads the map when asked (at most once per refreshGap) and
// every refreshEvery, until Close.
func (cl *Cluster) refresher() {
	defer cl.wg.Done()
	every := time.NewTicker(refreshEvery)
	defer every.Stop()
	gap := time.NewTimer(0)
	defer gap.Stop()
	for {
		select {
		case <-cl.done:
			cl.flush(nil, ErrShed)
			return
		case <-cl.kick:
		case <-every.C:
		}
		t, err := cl.read()
		cl.flush(t, err)
		gap.Reset(refreshGap)
		select {
		case <-cl.done:
		case <-gap.C:
		}
	}
}

// flush stores t (when err is nil) and sends the calls waiting for a map,
// or fails them with err.
func (cl *Cluster) flush(t *slotTable, err error) {
	cl.mu.Lock()
	if err == nil {
		cl.table.Store(t)
	}
	pending := cl.pending
	cl.pending = nil
	cl.mu.Unlock()
	for _, c := range pending {
		if err != nil {
			c.fail(err)
			continue
		}
		cl.Start(c, false)
	}
}

// pipe returns the pipe of the master at addr, made when first named: a
// redirect or a network error on it makes the link read the map again.
func (cl *Cluster) pipe(addr string) *Pipe {
	return cl.masterPipes.pipe(addr, MasterOptions(cl.opts, addr), func(p *Pipe) { p.redirected = cl.refresh })
}

// Close stops reading the map, fails the calls still waiting for one, and
// closes every master's pipe once drained. No call may start after it.
func (cl *Cluster) Close() {
	close(cl.done)
	cl.wg.Wait()
	cl.masterPipes.close()
	_ = cl.sub.Close() // ours alone
}

// WithCause returns err: a cluster's connection failures are told per
// master in the calls' own errors.
func (cl *Cluster) WithCause(err error) error { return err }

// Replica reports false: the map names masters only.
func (cl *Cluster) Replica() bool { return false }

// Sub is the client of the node's release subscription.
func (cl *Cluster) Sub() *redis.Client { return cl.sub }

// SetUp is how long a new connection may take to come up.
func (cl *Cluster) SetUp() time.Duration { return cl.setup }

// Masters returns each master's own client, reading the map first if none
// was read yet.
func (cl *Cluster) Masters(ctx context.Context) ([]*redis.Client, error) {
	t := cl.table.Load()
	if t == nil {
		var err error
		if t, err = cl.read(); err != nil {
			return nil, err
		}
	}
	seen := map[*Pipe]bool{}
	var out []*redis.Client
	for _, p := range t {
		if p != nil && !seen[p] {
			seen[p] = true
			out = append(out, p.own)
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, nil
}

// Hold stops the worker of key's queue on the master of key's slot (for
// tests); it does nothing before a map was read.
func (cl *Cluster) Hold(key string) (letGo func()) {
	if t := cl.table.Load(); t != nil && t[wire.Slot(key)] != nil {
		return t[wire.Slot(key)].Hold(key)
	}
	return func() {}
}
