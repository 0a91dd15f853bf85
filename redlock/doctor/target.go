package doctor

import (
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/nodeinfo"
)

// Target is one node of the quorum, as CheckNodes asks it: Server, Cluster
// or Sentinel make one, as redlock's constructors of the same names make a
// redlock.Node of the same client or options, and CheckNodes refuses
// exactly the targets that redlock.NewNodes refuses, in the same words.
// Give CheckNodes the targets in the order the Locker takes its nodes.
type Target interface {
	// plan is what CheckNodes needs of the i-th target: its description
	// as the Locker's node, and how to find its masters; or why it cannot
	// be a node.
	plan(i int) (nodeinfo.Node, plan, error)
}

// plan is one node to check: its address for the report, its kind, and
// the options its masters are found with (one of server, cluster,
// sentinel).
type plan struct {
	addr     string
	kind     Kind
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

func (t serverTarget) plan(i int) (nodeinfo.Node, plan, error) {
	d, err := nodeinfo.Server(t.c, i)
	if err != nil {
		return d, plan{}, err
	}
	return d, plan{server: t.c.Options()}, nil
}

type clusterTarget struct{ c *redis.ClusterClient }

// Cluster is the Redis Cluster that c reaches, as redlock.Cluster(c)
// makes it one node: CheckNodes reads its slot map on connections of its
// own (c's ClusterSlots when set, else CLUSTER SLOTS from its Addrs) and
// checks every master of it. A nil c, or one without Addrs, is an
// ErrInvalid of CheckNodes.
func Cluster(c *redis.ClusterClient) Target { return clusterTarget{c} }

func (t clusterTarget) plan(i int) (nodeinfo.Node, plan, error) {
	d, err := nodeinfo.Cluster(t.c, i)
	if err != nil {
		return d, plan{}, err
	}
	return d, plan{cluster: t.c.Options()}, nil
}

type sentinelTarget struct{ o *redis.FailoverOptions }

// Sentinel is the Sentinel group that o names (MasterName, SentinelAddrs),
// as a node: CheckNodes asks every sentinel for the group's master, and
// checks that master with o's credentials, TLS and dialer, and the
// group's settings. A nil o, one without a MasterName or SentinelAddrs,
// with an empty sentinel address, or with ReplicaOnly, is an ErrInvalid
// of CheckNodes, as of redlock.NewNodes.
func Sentinel(o *redis.FailoverOptions) Target { return sentinelTarget{o} }

func (t sentinelTarget) plan(i int) (nodeinfo.Node, plan, error) {
	d, err := nodeinfo.Sentinel(t.o, i)
	return d, plan{sentinel: t.o}, err
}

// kinds are the report's names of the kinds of node.
var kinds = map[nodeinfo.Kind]Kind{
	nodeinfo.KindServer:   KindServer,
	nodeinfo.KindCluster:  KindCluster,
	nodeinfo.KindSentinel: KindSentinel,
}

// plans checks the targets as redlock.NewNodes checks its nodes, and
// returns their plans, or an error matching redlock.ErrInvalid.
func plans(targets []Target) ([]plan, error) {
	infos, ps, err := nodeinfo.Describe(targets, Target.plan)
	if err != nil {
		return nil, invalid("%w", err)
	}
	for i, d := range infos {
		ps[i].addr, ps[i].kind = d.Addr, kinds[d.Kind]
		if d.Kind == nodeinfo.KindSentinel {
			// The report names a group by its sentinels too (Node.Addr).
			ps[i].addr += " " + strings.Join(d.Seeds, ",")
		}
	}
	return ps, nil
}
