package nodeinfo_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/redlock/internal/nodeinfo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// given is a node as the lock core or the checker holds it: an interface
// value that describes itself.
type given interface {
	describe(i int) (nodeinfo.Node, string, error)
}

type server struct{ c *redis.Client }

func (s server) describe(i int) (nodeinfo.Node, string, error) {
	d, err := nodeinfo.Server(s.c, i)
	return d, "server", err
}

type cluster struct{ c *redis.ClusterClient }

func (s cluster) describe(i int) (nodeinfo.Node, string, error) {
	d, err := nodeinfo.Cluster(s.c, i)
	return d, "cluster", err
}

type group struct{ o *redis.FailoverOptions }

func (s group) describe(i int) (nodeinfo.Node, string, error) {
	d, err := nodeinfo.Sentinel(s.o, i)
	return d, "sentinel", err
}

func client(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func clusterClient(t *testing.T, addrs ...string) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func sentinels(master string, addrs ...string) *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: master, SentinelAddrs: addrs}
}

// Each refusal names its node and reason on one line, never a password.
func TestDescribeRefuses(t *testing.T) {
	failover := redis.NewFailoverClient(sentinels("m", "127.0.0.1:1"))
	t.Cleanup(func() { _ = failover.Close() })
	a := server{client(t, "u:secret@127.0.0.1:7")}
	for _, tt := range []struct {
		name  string
		nodes []given
		want  string
	}{
		{"no nodes", nil, "no nodes"},
		{"nil node", []given{a, nil}, "node 1 is nil"},
		{"nil server", []given{a, server{}}, "node 1 is a Server of a nil client"},
		{"failover client", []given{server{failover}}, "node 0 is a Sentinel failover client"},
		{"nil cluster", []given{cluster{}}, "node 0 is a Cluster of a nil client"},
		{"no seeds", []given{cluster{clusterClient(t)}}, "node 0 is a Cluster with no addresses"},
		{"empty seed", []given{cluster{clusterClient(t, "h:1", "")}}, "node 0 is a Cluster with an empty address"},
		{"nil group", []given{group{}}, "node 0 is a Sentinel of nil options"},
		{"no master name", []given{group{sentinels("", "h:1")}}, "no MasterName"},
		{"no sentinels", []given{group{sentinels("m")}}, "no SentinelAddrs"},
		{"replica only", []given{group{&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"h:1"}, ReplicaOnly: true}}}, "ReplicaOnly"},
		{"empty sentinel", []given{group{sentinels("m", "")}}, "empty address in SentinelAddrs"},
		{"one address twice", []given{a, server{client(t, "localhost:7")}}, "nodes 0 and 1 are the same node (localhost:7)"},
		{"a seed as a server", []given{cluster{clusterClient(t, "h:2", "[::1]:7")}, a}, "nodes 0 and 1 are the same node (127.0.0.1:7)"},
		{"a shared sentinel", []given{group{sentinels("m", "h:1", "127.0.0.1:2")}, group{sentinels("m", "localhost:2")}}, "nodes 0 and 1 are the same node (sentinel m)"},
		// The first refusal in the order given wins.
		{"duplicate before a bad node", []given{a, a, server{}}, "nodes 0 and 1 are the same node"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nodes, kinds, err := nodeinfo.Describe(tt.nodes, given.describe)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.ContainsAny(err.Error(), "\n") || strings.Contains(err.Error(), "secret") {
				t.Fatalf("Describe: %v; want an error saying %q", err, tt.want)
			}
			if nodes != nil || kinds != nil {
				t.Errorf("a refusal returned nodes %v, %v", nodes, kinds)
			}
		})
	}
}

// Nodes of other servers or groups pass, described in order: a group of
// another master name shares sentinels freely.
func TestDescribe(t *testing.T) {
	list := []given{
		server{client(t, "u:secret@localhost:7")},
		cluster{clusterClient(t, "h:1", "h:2")},
		group{sentinels("m", "s:1", "s:2")},
		group{sentinels("n", "s:1")},
	}
	nodes, kinds, err := nodeinfo.Describe(list, given.describe)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, d := range nodes {
		addrs = append(addrs, d.Addr)
	}
	want := []string{"localhost:7", "cluster h:1,h:2", "sentinel m", "sentinel n"}
	if !slices.Equal(addrs, want) || !slices.Equal(kinds, []string{"server", "cluster", "sentinel", "sentinel"}) {
		t.Errorf("addresses %q, kinds %q; want %q", addrs, kinds, want)
	}
	if k := []nodeinfo.Kind{nodes[0].Kind, nodes[1].Kind, nodes[2].Kind}; !slices.Equal(k, []nodeinfo.Kind{nodeinfo.KindServer, nodeinfo.KindCluster, nodeinfo.KindSentinel}) {
		t.Errorf("kinds %v", k)
	}
	if !slices.Equal(nodes[2].Seeds, []string{"s:1", "s:2"}) || nodes[0].Seeds != nil {
		t.Errorf("seeds %q, %q", nodes[2].Seeds, nodes[0].Seeds)
	}
}

// Servers makes a node of each client, and refuses no clients or a nil
// one.
func TestServers(t *testing.T) {
	c := client(t, "h:1")
	got, err := nodeinfo.Servers([]*redis.Client{c, c}, func(c *redis.Client) string { return c.Options().Addr })
	if err != nil || !slices.Equal(got, []string{"h:1", "h:1"}) {
		t.Errorf("Servers: %q, %v", got, err)
	}
	for _, tt := range []struct {
		clients []*redis.Client
		want    string
	}{{nil, "no clients"}, {[]*redis.Client{c, nil}, "client 1 is nil"}} {
		if _, err := nodeinfo.Servers(tt.clients, func(*redis.Client) int { return 0 }); err == nil || err.Error() != tt.want {
			t.Errorf("Servers(%v): %v; want %q", tt.clients, err, tt.want)
		}
	}
}
