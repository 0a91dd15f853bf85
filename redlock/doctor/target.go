package doctor

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// Target is one node of the quorum, as CheckNodes asks it: Server, Cluster
// or Sentinel make one, as redlock's constructors of the same names make a
// redlock.Node of the same client or options. Give CheckNodes the targets
// in the order the Locker takes its nodes.
type Target interface {
	// plan is what CheckNodes needs of the i-th target, or why it cannot
	// be checked.
	plan(i int) (plan, error)
}

// plan is one node to check: its address for the report, keys that are
// equal for two nodes that name one server or deployment (ids, as the
// Locker's), and the options its masters are found with (one of server,
// cluster, sentinel).
type plan struct {
	addr     string
	kind     Kind
	ids      []string
	server   *redis.Options
	cluster  *redis.ClusterOptions
	sentinel *redis.FailoverOptions
}

type serverTarget struct{ c *redis.Client }

// Server is the standalone master that c reaches, as redlock.Server(c)
// makes it a node. Only c's options are used. A nil c, or a Sentinel
// failover client (give Sentinel its options instead), is an ErrInvalid
// of CheckNodes.
func Server(c *redis.Client) Target { return serverTarget{c} }

func (t serverTarget) plan(i int) (plan, error) {
	switch {
	case t.c == nil:
		return plan{}, invalid("node %d is a Server of a nil client", i)
	case conn.IsFailoverClient(t.c.Options()):
		return plan{}, invalid("node %d is a Server of a Sentinel failover client: give its options as a Sentinel node", i)
	}
	addr, key := nodeAddr(t.c.Options(), i)
	id := "addr " + key
	if key == "" {
		id = fmt.Sprintf("client %p", t.c)
	}
	return plan{addr: addr, kind: KindServer, ids: []string{id}, server: t.c.Options()}, nil
}

type clusterTarget struct{ c *redis.ClusterClient }

// Cluster is the Redis Cluster that c reaches, as redlock.Cluster(c)
// makes it one node: CheckNodes reads its slot map on connections of its
// own (c's ClusterSlots when set, else CLUSTER SLOTS from its Addrs) and
// checks every master of it. A nil c, or one without Addrs, is an
// ErrInvalid of CheckNodes.
func Cluster(c *redis.ClusterClient) Target { return clusterTarget{c} }

func (t clusterTarget) plan(i int) (plan, error) {
	if t.c == nil {
		return plan{}, invalid("node %d is a Cluster of a nil client", i)
	}
	o := t.c.Options()
	if len(o.Addrs) == 0 {
		return plan{}, invalid("node %d is a Cluster with no addresses (ClusterOptions.Addrs)", i)
	}
	ids, addrs := make([]string, len(o.Addrs)), make([]string, len(o.Addrs))
	for j, a := range o.Addrs {
		addr, key, ok := conn.NodeAddr(conn.MasterOptions(o, a))
		if !ok {
			return plan{}, invalid("node %d is a Cluster with an empty address", i)
		}
		ids[j], addrs[j] = "addr "+key, addr
	}
	return plan{addr: "cluster " + strings.Join(addrs, ","), kind: KindCluster, ids: ids, cluster: o}, nil
}

type sentinelTarget struct{ o *redis.FailoverOptions }

// Sentinel is the Sentinel group that o name (MasterName, SentinelAddrs),
// as a node: CheckNodes asks every sentinel for the group's master, and
// checks that master with o's credentials, TLS and dialer, and the
// group's settings. A nil o, or one without a MasterName or
// SentinelAddrs, is an ErrInvalid of CheckNodes.
func Sentinel(o *redis.FailoverOptions) Target { return sentinelTarget{o} }

func (t sentinelTarget) plan(i int) (plan, error) {
	switch {
	case t.o == nil:
		return plan{}, invalid("node %d is a Sentinel of nil options", i)
	case t.o.MasterName == "":
		return plan{}, invalid("node %d is a Sentinel with no master name (FailoverOptions.MasterName)", i)
	case len(t.o.SentinelAddrs) == 0:
		return plan{}, invalid("node %d is a Sentinel with no sentinels (FailoverOptions.SentinelAddrs)", i)
	}
	ids, addrs := make([]string, len(t.o.SentinelAddrs)), make([]string, len(t.o.SentinelAddrs))
	for j, a := range t.o.SentinelAddrs {
		addr, key, ok := conn.NodeAddr(&redis.Options{Network: "tcp", Addr: a})
		if !ok {
			return plan{}, invalid("node %d is a Sentinel with an empty sentinel address", i)
		}
		// Two groups of one name watched by one sentinel are one group.
		ids[j], addrs[j] = "sentinel "+t.o.MasterName+" "+key, addr
	}
	return plan{addr: "sentinel " + t.o.MasterName + " " + strings.Join(addrs, ","), kind: KindSentinel, ids: ids, sentinel: t.o}, nil
}

// plans checks the targets as redlock.NewNodes checks its nodes, and
// returns their plans, or an error matching redlock.ErrInvalid.
func plans(targets []Target) ([]plan, error) {
	if len(targets) == 0 {
		return nil, invalid("no nodes")
	}
	out := make([]plan, len(targets))
	seen := map[string]int{}
	for i, t := range targets {
		if t == nil {
			return nil, invalid("node %d is nil", i)
		}
		p, err := t.plan(i)
		if err != nil {
			return nil, err
		}
		for _, id := range p.ids {
			if j, dup := seen[id]; dup && j != i {
				return nil, invalid("nodes %d and %d are the same node (%s): it would vote twice", j, i, p.addr)
			}
			seen[id] = i
		}
		out[i] = p
	}
	return out, nil
}

// sentinelOptions are the options of a client of the group's sentinel at
// addr: the sentinels' credentials, o's TLS, dialer and timeouts.
func sentinelOptions(o *redis.FailoverOptions, addr string) *redis.Options {
	return &redis.Options{
		Network: "tcp", Addr: addr, ClientName: o.ClientName, Dialer: o.Dialer,
		Protocol: o.Protocol, Username: o.SentinelUsername, Password: o.SentinelPassword,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		TLSConfig: o.TLSConfig, DisableIdentity: o.DisableIdentity, IdentitySuffix: o.IdentitySuffix,
	}
}

// groupMasterOptions are the options of a client of the group's master at
// addr: o's credentials, database, TLS, dialer and timeouts.
func groupMasterOptions(o *redis.FailoverOptions, addr string) *redis.Options {
	return &redis.Options{
		Network: "tcp", Addr: addr, ClientName: o.ClientName, Dialer: o.Dialer, OnConnect: o.OnConnect,
		Protocol: o.Protocol, Username: o.Username, Password: o.Password, DB: o.DB,
		CredentialsProvider: o.CredentialsProvider, CredentialsProviderContext: o.CredentialsProviderContext,
		StreamingCredentialsProvider: o.StreamingCredentialsProvider,
		DialTimeout:                  o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		TLSConfig: o.TLSConfig, DisableIdentity: o.DisableIdentity, IdentitySuffix: o.IdentitySuffix,
	}
}
