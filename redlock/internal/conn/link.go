package conn

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Link is one node's connection layer, whatever the node is: a Pipe for a
// standalone master, a Cluster for a Redis Cluster (a Pipe per master, each
// call routed by its keys' slot), a Sentinel for a Sentinel group (a Pipe
// per master, each call sent to the one the sentinels name). The core
// sends every call through it.
type Link interface {
	// Start queues c; c.Reply receives its outcome exactly once (see
	// Pipe.Start).
	Start(c *Call, inline bool)
	// UseFunctions makes new connections load the restart guard's
	// function library (see Pipe.UseFunctions).
	UseFunctions()
	// EndSetUps ends the connection set-ups under way (see
	// Pipe.EndSetUps); Close stops the link once its queues drained.
	EndSetUps()
	Close()
	// WithCause adds why the last connection attempt failed to err.
	WithCause(err error) error
	// Replica reports whether a server of the node said it was a replica.
	Replica() bool
	// Sub is the client of the node's release subscription, and SetUp how
	// long one of its connections may take to come up.
	Sub() *redis.Client
	SetUp() time.Duration
	// Masters returns a client of the link's own for every master of the
	// node, for calls outside the queues (a scan).
	Masters(ctx context.Context) ([]*redis.Client, error)
	// Hold stops the worker of key's queue, until letGo (for tests).
	Hold(key string) (letGo func())
}

var (
	_ Link = (*Pipe)(nil)
	_ Link = (*Cluster)(nil)
	_ Link = (*Sentinel)(nil)
)

// Masters returns the pipe's own client: a standalone node is one master.
func (p *Pipe) Masters(context.Context) ([]*redis.Client, error) {
	return []*redis.Client{p.own}, nil
}

// SlotMoving reports whether err is a cluster's answer that the call's
// slot is served elsewhere or is moving (MOVED, ASK, TRYAGAIN): the node
// answers, one slot's call failed.
func SlotMoving(err error) bool {
	if err == nil {
		return false
	}
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask || redis.IsTryAgainError(err)
}

// Redirected reports whether err is a cluster's answer that the call's
// slot is not served where it was sent, or not right now: MOVED, ASK,
// TRYAGAIN or CLUSTERDOWN. Such a reply is the node's failed vote; the
// call is never sent again within its round.
func Redirected(err error) bool {
	return SlotMoving(err) || err != nil && redis.IsClusterDownError(err)
}

// errNoSlotOwner fails a call on a cluster whose slot no master serves in
// the last map the link read (a failed shard, a cluster being set up).
var errNoSlotOwner = errors.New("redlock: no master of the cluster serves the key's slot (CLUSTERDOWN)")
