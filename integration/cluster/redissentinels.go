package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// SentinelGroups is a quorum whose nodes are Sentinel groups
// (Options.Sentinel): each node is a master, two replicas and three
// sentinels, redis-server processes on loopback (internal/redistest),
// without persistence. Every data server has min-replicas-to-write 1, as
// docs/deployment.md asks of a Sentinel group. The second replica has
// replica-priority 0: Sentinel never promotes it, so that a failover
// always promotes the other data server that is not master (the
// promotable one), while the witness still counts for
// min-replicas-to-write. There are no proxies: a client asks the
// sentinels where the master is and reaches it directly, so every fault
// acts on the servers and the sentinels (sentinelfaults.go).
type SentinelGroups struct {
	// Groups are the quorum's nodes, in a fixed order.
	Groups []*redistest.SentinelGroup

	opts Options
}

// sentinelPrefix starts the address of a Sentinel group node of the
// quorum (SentinelGroups.Addrs): the prefix, the master's name, "@", then
// the sentinels' addresses, comma-separated.
const sentinelPrefix = "redis-sentinel:"

// SentinelNode returns the master name and the sentinel addresses of a
// Sentinel group node's address (SentinelGroups.Addrs), and false for any
// other address.
func SentinelNode(addr string) (name string, sentinels []string, ok bool) {
	rest, ok := strings.CutPrefix(addr, sentinelPrefix)
	if !ok {
		return "", nil, false
	}
	name, list, ok := strings.Cut(rest, "@")
	if !ok {
		return "", nil, false
	}
	return name, strings.Split(list, ","), true
}

// NewFailoverOptions returns the go-redis options of a Sentinel group
// node set up as NewClient's: context deadlines honoured, no retries. The
// library reads them and opens connections of its own.
func NewFailoverOptions(name string, sentinels []string) *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            name,
		SentinelAddrs:         sentinels,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		PoolSize:              4,
		Protocol:              2,
		DisableIdentity:       true,
	}
}

// sentinelGroupOptions are the options of each group: the second replica
// is the witness (replica-priority 0), and a master takes a write only
// while a replica is in touch (min-replicas-to-write 1, the default
// min-replicas-max-lag of 10 s).
var sentinelGroupOptions = redistest.SentinelOptions{
	Replicas:   2,
	Priorities: []int{100, 0},
	Server:     redistest.Options{Args: []string{"--min-replicas-to-write", "1"}},
}

// StartSentinelGroups starts n Sentinel groups at once. opts must ask for
// Sentinel and nothing else. On failure it stops what it started.
func StartSentinelGroups(ctx context.Context, n int, opts Options) (*SentinelGroups, error) {
	if want := (Options{Sentinel: true}); opts != want {
		return nil, fmt.Errorf("sentinel groups: options %v, want %v", opts, want)
	}
	sg := &SentinelGroups{Groups: make([]*redistest.SentinelGroup, n), opts: opts}
	err := inParallel(n, func(i int) (err error) {
		sg.Groups[i], err = redistest.StartSentinelGroup(ctx, sentinelGroupOptions)
		return err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting %d sentinel groups: %w", n, err), sg.Close(ctx))
	}
	return sg, nil
}

// Options returns the options the groups were started with.
func (sg *SentinelGroups) Options() Options { return sg.opts }

// Addrs returns each group's address as a quorum node (SentinelNode).
func (sg *SentinelGroups) Addrs() []string {
	out := make([]string, len(sg.Groups))
	for i, g := range sg.Groups {
		out[i] = sentinelPrefix + g.Name + "@" + strings.Join(g.SentinelAddrs(), ",")
	}
	return out
}

// ServerAddrs is Addrs: clients reach a group's servers directly.
func (sg *SentinelGroups) ServerAddrs() []string { return sg.Addrs() }

// Heal undoes what a fault left behind, in every group at once: it
// continues every paused process, starts every killed one, lets every
// replica reach its master again (masterauth, which the lost-writes fault
// spoils), and points every data server that is not the master the
// sentinels name at it, as a sentinel would within about ten seconds of a
// failover, waiting until each one's link is up. Who is master stays as it
// is.
func (sg *SentinelGroups) Heal(ctx context.Context) error {
	return inParallel(len(sg.Groups), func(i int) error { return healGroup(ctx, sg.Groups[i]) })
}

// healGroup is Heal of one group.
func healGroup(ctx context.Context, g *redistest.SentinelGroup) error {
	var errs []error
	for _, s := range append(append([]*redistest.Server{}, g.Sentinels...), g.Servers...) {
		errs = append(errs, wake(s))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, s := range g.Servers {
		errs = append(errs, configSet(ctx, s, "masterauth", ""))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	m, err := g.Master(ctx)
	if err != nil {
		return err
	}
	return settle(ctx, g, m)
}

// settle points every data server of g but m, the master the sentinels
// name, at m (REPLICAOF, where it is a master or replicates another
// server), and waits until each one's link is up.
func settle(ctx context.Context, g *redistest.SentinelGroup, m *redistest.Server) error {
	for _, s := range g.Servers {
		if s == m {
			continue
		}
		cl := s.NewClient()
		info, err := cl.Info(ctx, "replication").Result()
		if err == nil && !(strings.Contains(info, "role:slave") && strings.Contains(info, "master_port:"+strconv.Itoa(m.Port)+"\r\n")) {
			err = cl.ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(m.Port)).Err()
		}
		err = errors.Join(err, cl.Close())
		if err != nil {
			return fmt.Errorf("pointing %s at the master %s: %w", s.Addr, m.Addr, err)
		}
		if err := g.AwaitReplica(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// Reset heals every group and empties every master, waiting until its
// replicas have emptied too, so the groups can serve another run.
func (sg *SentinelGroups) Reset(ctx context.Context) error {
	if err := sg.Heal(ctx); err != nil {
		return err
	}
	var errs []error
	for _, g := range sg.Groups {
		m, err := g.Master(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, flushMaster(ctx, m, len(g.Servers)-1))
	}
	return errors.Join(errs...)
}

// configSet sets a parameter of s (CONFIG SET).
func configSet(ctx context.Context, s *redistest.Server, param, value string) error {
	cl := s.NewClient()
	defer cl.Close()
	if err := cl.ConfigSet(ctx, param, value).Err(); err != nil {
		return fmt.Errorf("CONFIG SET %s on %s: %w", param, s.Addr, err)
	}
	return nil
}

// Close stops every group.
func (sg *SentinelGroups) Close(context.Context) error { return closeEach(sg.Groups) }
