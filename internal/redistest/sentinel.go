package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions configure a Sentinel group (StartSentinelGroup).
type SentinelOptions struct {
	// Replicas is the number of replicas of the first master; 1 by default.
	Replicas int
	// Priorities are the replicas' replica-priority, in order; Redis's
	// default (100) for a replica without one. Sentinel promotes the
	// replica of the lowest priority first, and never one of priority 0,
	// which still counts for the master's min-replicas-to-write.
	Priorities []int
	// Sentinels is the number of sentinels; 3 by default.
	Sentinels int
	// Quorum is how many sentinels must agree that the master is down
	// before a failover; 2 by default.
	Quorum int
	// DownAfter is down-after-milliseconds: how long the master may stay
	// silent before a sentinel counts it as down; 2s by default.
	DownAfter time.Duration
	// FailoverTimeout is failover-timeout; 6s by default. A sentinel
	// does not fail the same master over again within twice this.
	FailoverTimeout time.Duration
	// Server are the data servers' options (Persistent, Binary, Args,
	// Env); Dir must be empty. The sentinels take Binary and Env.
	Server Options
}

// SentinelGroup is a master, its replicas and the sentinels that watch
// them, each a redis-server process on loopback. Its methods are safe for
// concurrent use.
type SentinelGroup struct {
	// Name is the master's name in Sentinel.
	Name string
	// Servers are the data servers: Servers[0] the first master, then its
	// replicas. Failovers change who is master, not this order.
	Servers []*Server
	// Sentinels are the sentinels.
	Sentinels []*Server
}

// StartSentinelGroupT starts a Sentinel group for a test
// (StartSentinelGroup) and closes it at cleanup. Failures end the test.
func StartSentinelGroupT(t testing.TB, opts SentinelOptions) *SentinelGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := StartSentinelGroup(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("closing the Sentinel group: %v", err)
		}
	})
	return g
}

// StartSentinelGroup starts the master, its replicas (waiting until each
// has synchronised) and the sentinels, and waits until every sentinel
// names the master and knows every replica and every other sentinel, so
// that a failover can start at once. On failure, or when ctx ends first,
// it stops whatever it started.
func StartSentinelGroup(ctx context.Context, opts SentinelOptions) (*SentinelGroup, error) {
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Sentinels == 0 {
		opts.Sentinels = 3
	}
	if opts.Quorum == 0 {
		opts.Quorum = 2
	}
	if opts.DownAfter == 0 {
		opts.DownAfter = 2 * time.Second
	}
	if opts.FailoverTimeout == 0 {
		opts.FailoverTimeout = 6 * time.Second
	}
	switch {
	case opts.Replicas < 0:
		return nil, fmt.Errorf("redistest: %d replicas", opts.Replicas)
	case opts.Sentinels < 1 || opts.Quorum < 1 || opts.Quorum > opts.Sentinels:
		return nil, fmt.Errorf("redistest: %d sentinels with a quorum of %d", opts.Sentinels, opts.Quorum)
	case opts.DownAfter < time.Millisecond || opts.FailoverTimeout < time.Millisecond:
		return nil, fmt.Errorf("redistest: down-after %v, failover-timeout %v", opts.DownAfter, opts.FailoverTimeout)
	case len(opts.Priorities) > opts.Replicas:
		return nil, fmt.Errorf("redistest: %d priorities for %d replicas", len(opts.Priorities), opts.Replicas)
	case opts.Server.Dir != "":
		return nil, errors.New("redistest: the group's servers get directories of their own; leave Dir empty")
	}
	g := &SentinelGroup{Name: "redistest"}
	o := opts.Server
	o.configFile = "redis.conf"
	// A master waits 5s by default before a diskless full sync, for more
	// replicas to share it.
	o.config = "repl-diskless-sync-delay 0\n"
	master, err := Start(o)
	if err != nil {
		return nil, err
	}
	g.Servers = append(g.Servers, master)
	replicas, err := startReplicas(opts, o, master)
	if err != nil {
		return nil, errors.Join(err, g.Close())
	}
	g.Servers = append(g.Servers, replicas...)
	if err := g.awaitSynced(ctx, master, replicas); err != nil {
		return nil, errors.Join(err, g.Close())
	}
	so := Options{
		Binary:     opts.Server.Binary,
		Env:        opts.Server.Env,
		Args:       []string{"--sentinel"},
		configFile: "sentinel.conf",
		readyLine:  "Sentinel ID is",
		config: fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d %[3]d\n"+
			"sentinel down-after-milliseconds %[1]s %[4]d\n"+
			"sentinel failover-timeout %[1]s %[5]d\n"+
			"sentinel parallel-syncs %[1]s 1\n",
			g.Name, master.Port, opts.Quorum, opts.DownAfter.Milliseconds(), opts.FailoverTimeout.Milliseconds()),
	}
	if g.Sentinels, err = startAll(opts.Sentinels, so); err != nil {
		return nil, errors.Join(err, g.Close())
	}
	if err := g.awaitWatching(ctx, master, opts.Replicas); err != nil {
		return nil, errors.Join(err, g.Close())
	}
	return g, nil
}

// startReplicas starts opts.Replicas replicas of master at once, each with
// the options o and its priority.
func startReplicas(opts SentinelOptions, o Options, master *Server) ([]*Server, error) {
	replicas := make([]*Server, opts.Replicas)
	errs := make([]error, opts.Replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		ro := o
		ro.Args = append(append([]string{}, o.Args...), "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
		if i < len(opts.Priorities) {
			ro.Args = append(ro.Args, "--replica-priority", strconv.Itoa(opts.Priorities[i]))
		}
		wg.Go(func() { replicas[i], errs[i] = Start(ro) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil {
		for _, s := range replicas {
			if s != nil {
				err = errors.Join(err, s.Close())
			}
		}
		return nil, err
	}
	return replicas, nil
}

// Close stops every server and sentinel, removes their directories and
// releases their ports.
func (g *SentinelGroup) Close() error {
	var err error
	for _, s := range append(append([]*Server{}, g.Sentinels...), g.Servers...) {
		err = errors.Join(err, s.Close())
	}
	return err
}

// SentinelAddrs are the sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	addrs := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		addrs[i] = s.Addr
	}
	return addrs
}

// FailoverOptions are go-redis options for a client of the group's master,
// set up for lock use: context deadlines honoured, no command retries.
func (g *SentinelGroup) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            g.Name,
		SentinelAddrs:         g.SentinelAddrs(),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		Protocol:              2,
		DisableIdentity:       true,
	}
}

// Server returns the group's data server at addr, or nil.
func (g *SentinelGroup) Server(addr string) *Server {
	for _, s := range g.Servers {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// Named returns the master each answering sentinel names now (SENTINEL
// GET-MASTER-ADDR-BY-NAME), one address per sentinel.
func (g *SentinelGroup) Named(ctx context.Context) ([]string, error) {
	var named []string
	for _, s := range g.Sentinels {
		if !s.answering() {
			continue
		}
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, Protocol: 2, DisableIdentity: true, ContextTimeoutEnabled: true})
		hp, err := sc.GetMasterAddrByName(ctx, g.Name).Result()
		_ = sc.Close()
		if err != nil {
			return nil, fmt.Errorf("sentinel %s: %w", s.Addr, err)
		}
		if len(hp) != 2 {
			return nil, fmt.Errorf("sentinel %s names %v", s.Addr, hp)
		}
		named = append(named, net.JoinHostPort(hp[0], hp[1]))
	}
	if len(named) == 0 {
		return nil, errors.New("no sentinel answers")
	}
	return named, nil
}

// Master waits until every answering sentinel names the same master and
// returns it.
func (g *SentinelGroup) Master(ctx context.Context) (*Server, error) {
	var m *Server
	err := poll(ctx, "the sentinels name one master", func() error {
		named, err := g.Named(ctx)
		if err != nil {
			return err
		}
		for _, a := range named[1:] {
			if a != named[0] {
				return fmt.Errorf("the sentinels name %v", named)
			}
		}
		if m = g.Server(named[0]); m == nil {
			return fmt.Errorf("the sentinels name %s, not one of the group", named[0])
		}
		return nil
	})
	return m, err
}

// Failover has the first answering sentinel fail the master over
// (SENTINEL FAILOVER) and waits until every answering sentinel names the
// same new master and that server says it is a master. It returns the old
// master and the new one. The old master goes on taking writes as a
// master until a sentinel tells it to replicate the new one (AwaitReplica).
func (g *SentinelGroup) Failover(ctx context.Context) (old, new *Server, err error) {
	if old, err = g.Master(ctx); err != nil {
		return nil, nil, err
	}
	// A sentinel refuses while it has no replica it trusts (NOGOODSLAVE:
	// one it has not had an INFO reply from since it learned of it, as
	// right after a failover) or while its last failover still runs
	// (INPROG); ask again.
	err = poll(ctx, "a sentinel starts a failover", func() error {
		for _, s := range g.Sentinels {
			if !s.answering() {
				continue
			}
			cl := newClient(s.Addr)
			err := cl.Do(ctx, "SENTINEL", "FAILOVER", g.Name).Err()
			_ = cl.Close()
			if err != nil {
				return fmt.Errorf("SENTINEL FAILOVER on %s: %w", s.Addr, err)
			}
			return nil
		}
		return errors.New("no sentinel answers")
	})
	if err != nil {
		return nil, nil, err
	}
	err = poll(ctx, "the sentinels name a new master", func() error {
		m, err := g.Master(ctx)
		if err != nil {
			return err
		}
		if m == old {
			return errors.New("the sentinels still name the old master")
		}
		if role, err := m.Role(ctx); err != nil || role != "master" {
			return fmt.Errorf("%s's role is %q (%v)", m.Addr, role, err)
		}
		new = m
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return old, new, nil
}

// AwaitReplica waits until s says it is a replica (ROLE), with its link to
// its master up: a demoted master once Sentinel has reconfigured it.
func (g *SentinelGroup) AwaitReplica(ctx context.Context, s *Server) error {
	return poll(ctx, s.Addr+" is a replica", func() error {
		role, err := s.Role(ctx)
		if err != nil || role != "slave" {
			return fmt.Errorf("role %q (%v)", role, err)
		}
		cl := s.NewClient()
		defer cl.Close()
		link, err := infoString(ctx, cl, "master_link_status")
		if err != nil || link != "up" {
			return fmt.Errorf("master link %q (%v)", link, err)
		}
		return nil
	})
}

// awaitSynced waits until every replica's link to master is up.
func (g *SentinelGroup) awaitSynced(ctx context.Context, master *Server, replicas []*Server) error {
	for _, r := range replicas {
		if err := poll(ctx, "replica "+r.Addr+" has synchronised with "+master.Addr, func() error {
			cl := r.NewClient()
			defer cl.Close()
			link, err := infoString(ctx, cl, "master_link_status")
			if err != nil || link != "up" {
				return fmt.Errorf("master link %q (%v)", link, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// awaitWatching waits until every sentinel names master, knows its n
// replicas as connected and not down, and knows every other sentinel.
func (g *SentinelGroup) awaitWatching(ctx context.Context, master *Server, n int) error {
	return poll(ctx, "every sentinel watches the group", func() error {
		for _, s := range g.Sentinels {
			cl := newClient(s.Addr)
			err := sentinelWatching(ctx, cl, g.Name, n, len(g.Sentinels)-1)
			_ = cl.Close()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", s.Addr, err)
			}
		}
		named, err := g.Named(ctx)
		if err != nil {
			return err
		}
		for _, a := range named {
			if a != master.Addr {
				return fmt.Errorf("a sentinel names %s", a)
			}
		}
		return nil
	})
}

func sentinelWatching(ctx context.Context, cl *redis.Client, name string, replicas, others int) error {
	rs, err := cl.Do(ctx, "SENTINEL", "REPLICAS", name).Slice()
	if err != nil {
		return err
	}
	good := 0
	for _, r := range rs {
		flags := fieldOf(r, "flags")
		if flags == "slave" {
			good++
		}
	}
	if good < replicas {
		return fmt.Errorf("knows %d of %d replicas in good shape", good, replicas)
	}
	ss, err := cl.Do(ctx, "SENTINEL", "SENTINELS", name).Slice()
	if err != nil {
		return err
	}
	if len(ss) < others {
		return fmt.Errorf("knows %d of %d other sentinels", len(ss), others)
	}
	return nil
}

// fieldOf returns a field of a SENTINEL REPLICAS entry, a flat list of
// names and values in RESP2.
func fieldOf(entry any, name string) string {
	kv, ok := entry.([]any)
	if !ok {
		return ""
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, _ := kv[i].(string); k == name {
			v, _ := kv[i+1].(string)
			return v
		}
	}
	return ""
}
