// Package nodeinfo describes the nodes of a quorum from the go-redis
// clients and options they are made of: the address messages name a node
// by, the keys that show two nodes to be one server or one deployment,
// and why a client or options cannot be a node at all. The lock core
// (redlock.NewNodes) and the deployment checker (doctor.CheckNodes) both
// take their nodes through it, so that they accept the same nodes and
// refuse the others with the same words.
//
// Its errors are plain: each caller wraps them in its own ErrInvalid.
package nodeinfo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// Kind is how a node was given: which of Server, Cluster and Sentinel
// described it.
type Kind int

// The kinds of node.
const (
	KindServer   Kind = iota // a standalone master
	KindCluster              // a Redis Cluster, one vote per lock from the master of its key's slot
	KindSentinel             // a Sentinel group, one vote from the master its sentinels name
)

// Node is one node as given, before anything is asked of it.
type Node struct {
	Kind Kind
	// Addr names the node in messages, credentials removed: a server's
	// address ("node <i>" when its address says nothing), "cluster " and
	// the cluster's seed addresses, or "sentinel " and the group's
	// master name.
	Addr string
	// Seeds are the addresses a cluster's masters or a group's master
	// are found from (ClusterOptions.Addrs, FailoverOptions.SentinelAddrs),
	// credentials removed; nil for a server.
	Seeds []string
	// IDs are keys equal for two nodes that name one server (by its
	// address, or its client when the address says nothing) or one
	// Sentinel group (by a shared sentinel and the master name): Describe
	// refuses two nodes that share one.
	IDs []string
}

// Server describes the standalone master that c reaches, the i-th node.
// It refuses a nil c, and a Sentinel failover client
// (redis.NewFailoverClient), whose connections keep voting on a master
// that Sentinel demotes.
func Server(c *redis.Client, i int) (Node, error) {
	switch {
	case c == nil:
		return Node{}, fmt.Errorf("node %d is a Server of a nil client", i)
	case conn.IsFailoverClient(c.Options()):
		// Its connections keep voting on a demoted master after a
		// failover, for as long as they stay open: two holders.
		return Node{}, fmt.Errorf("node %d is a Sentinel failover client: a master that Sentinel demotes keeps its votes on open connections; give its FailoverOptions to redlock.Sentinel instead", i)
	}
	if addr, key, ok := conn.NodeAddr(c.Options()); ok {
		return Node{Kind: KindServer, Addr: addr, IDs: []string{"addr " + key}}, nil
	}
	// Tell clients whose address says nothing apart by identity.
	return Node{Kind: KindServer, Addr: fmt.Sprintf("node %d", i), IDs: []string{fmt.Sprintf("client %p", c)}}, nil
}

// Cluster describes the Redis Cluster that c reaches, the i-th node: one
// ID per seed address, so two clusters that share a seed are one. It
// refuses a nil c, no Addrs (ClusterSlots alone names no seed to tell two
// clusters apart by) and an empty address.
func Cluster(c *redis.ClusterClient, i int) (Node, error) {
	if c == nil {
		return Node{}, fmt.Errorf("node %d is a Cluster of a nil client", i)
	}
	o := c.Options()
	if len(o.Addrs) == 0 {
		return Node{}, fmt.Errorf("node %d is a Cluster with no addresses (ClusterOptions.Addrs)", i)
	}
	ids, seeds, ok := seedsOf(o.Addrs, "addr ", func(a string) *redis.Options { return conn.MasterOptions(o, a) })
	if !ok {
		return Node{}, fmt.Errorf("node %d is a Cluster with an empty address", i)
	}
	return Node{Kind: KindCluster, Addr: "cluster " + strings.Join(seeds, ","), Seeds: seeds, IDs: ids}, nil
}

// Sentinel describes the Sentinel group that o names, the i-th node: one
// ID per sentinel and master name, so two nodes that share a sentinel
// watching one group are one group given twice (a group reached through
// disjoint sentinels is caught later, by the servers' identity). It
// refuses nil options, an empty MasterName, no SentinelAddrs, ReplicaOnly
// (a replica cannot vote) and an empty sentinel address.
func Sentinel(o *redis.FailoverOptions, i int) (Node, error) {
	switch {
	case o == nil:
		return Node{}, fmt.Errorf("node %d is a Sentinel of nil options", i)
	case o.MasterName == "":
		return Node{}, fmt.Errorf("node %d is a Sentinel with no MasterName", i)
	case len(o.SentinelAddrs) == 0:
		return Node{}, fmt.Errorf("node %d is a Sentinel with no SentinelAddrs", i)
	case o.ReplicaOnly:
		return Node{}, fmt.Errorf("node %d is a Sentinel with ReplicaOnly: a replica cannot vote", i)
	}
	ids, seeds, ok := seedsOf(o.SentinelAddrs, "sentinel "+o.MasterName+" ", func(a string) *redis.Options { return conn.SentinelOptions(o, a) })
	if !ok {
		return Node{}, fmt.Errorf("node %d is a Sentinel with an empty address in SentinelAddrs", i)
	}
	return Node{Kind: KindSentinel, Addr: "sentinel " + o.MasterName, Seeds: seeds, IDs: ids}, nil
}

// seedsOf returns, for each of addrs, an ID (idPrefix and the address's
// key) and the address for messages, both from the options of a client of
// it; ok is false when an address is empty.
func seedsOf(addrs []string, idPrefix string, options func(addr string) *redis.Options) (ids, seeds []string, ok bool) {
	ids, seeds = make([]string, len(addrs)), make([]string, len(addrs))
	for j, a := range addrs {
		addr, key, ok := conn.NodeAddr(options(a))
		if !ok {
			return nil, nil, false
		}
		ids[j], seeds[j] = idPrefix+key, addr
	}
	return ids, seeds, true
}

// Servers makes each of a list of plain clients, one standalone master
// each, a node with server (the caller's Server, which Describe then
// describes). It refuses no clients and a nil one.
func Servers[T any](clients []*redis.Client, server func(*redis.Client) T) ([]T, error) {
	if len(clients) == 0 {
		return nil, errors.New("no clients")
	}
	nodes := make([]T, len(clients))
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("client %d is nil", i)
		}
		nodes[i] = server(c)
	}
	return nodes, nil
}

// Describe describes every node of list, in order, with describe, which
// also returns what its caller needs of the node (how to open it, how to
// check it). It refuses an empty list, a nil node (T is an interface
// type), the first refusal of describe, and a node whose IDs meet an
// earlier node's: that one server would cast two votes. On failure it
// returns only the error.
func Describe[T, S any](list []T, describe func(n T, i int) (Node, S, error)) ([]Node, []S, error) {
	if len(list) == 0 {
		return nil, nil, errors.New("no nodes")
	}
	nodes, extra := make([]Node, len(list)), make([]S, len(list))
	seen := make(map[string]int, len(list))
	for i, n := range list {
		if any(n) == nil {
			return nil, nil, fmt.Errorf("node %d is nil", i)
		}
		d, s, err := describe(n, i)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range d.IDs {
			if j, dup := seen[id]; dup && j != i {
				return nil, nil, fmt.Errorf("nodes %d and %d are the same node (%s): it would vote twice", j, i, d.Addr)
			}
			seen[id] = i
		}
		nodes[i], extra[i] = d, s
	}
	return nodes, extra, nil
}
