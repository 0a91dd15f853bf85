package notify

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// nodeSub is the notifier's subscription on one node.
type nodeSub struct {
	ps *redis.PubSub // nil while there is none
	// After a failure (see settled) the node is left out until retryAt,
	// and timer subscribes it again then if anyone still waits; backoff
	// is that wait, doubled by each failure in a row.
	retryAt time.Time
	backoff time.Duration
	timer   *time.Timer
}

// each runs fn on every node's subscription in parallel, each bounded by
// the node timeout. fn only writes on a connection that is up: a node
// without a subscription is left out, and with create its timer makes one
// (see connect), on which every key with waiters is subscribed then. A
// subscription fn could not use is dropped (see settled).
func (n *Notifier) each(ctx context.Context, timeout time.Duration, create bool, fn func(context.Context, *redis.PubSub) error) {
	quorum.Each(ctx, len(n.nodes), timeout, n.bg, func(ctx context.Context, i int) {
		n.mu.Lock()
		ps := n.subs[i].ps
		if ps == nil && create {
			n.retryLater(i)
		}
		n.mu.Unlock()
		if ps != nil {
			n.settled(i, ps, fn(ctx, ps))
		}
	})
}

// The wait after a node's subscription failed before the next try:
// subRetryFirst, doubled by each failure in a row, at most subRetryMax.
// Without it a node that resets or refuses connections was dialled at
// every waiter's arrival and departure, with subMu held: in the chaos
// suite's reset fault, hundreds of dials a second, and the waiters of
// every key queued behind each. A node back from an outage wakes waiters
// again within subRetryMax; the other nodes' announcements and the timers
// wake them meanwhile.
const (
	subRetryFirst = 5 * time.Millisecond
	subRetryMax   = time.Second
)

// retryLater starts node i's timer, for the end of its wait after a
// failure or at once, unless it is set already or the notifier closed;
// under mu.
func (n *Notifier) retryLater(i int) {
	if n.closed || n.subs[i].timer != nil {
		return
	}
	n.wg.Add(1)
	n.subs[i].timer = time.AfterFunc(time.Until(n.subs[i].retryAt), func() {
		defer n.wg.Done()
		n.connect(i)
	})
}

// connect is node i's timer: if anyone waits, it makes the node's
// subscription, its connection first and outside subMu (a dial that hangs
// holds up no waiter), then subscribes every key that has waiters.
// Confirmations of keys the node's last subscription had wake their
// waiters (see confirmed): releases in between went unannounced there.
func (n *Notifier) connect(i int) {
	// The timer stays set until the try ends: one try at a time.
	n.mu.Lock()
	idle := n.closed || n.subs[i].ps != nil || len(n.waiters) == 0
	if idle {
		n.subs[i].timer = nil
	}
	n.mu.Unlock()
	if idle {
		return
	}
	// As long as a worker's connection may take to come up: a node far
	// away (a TLS handshake, say) needs more than one call's time.
	node := n.nodes[i]
	ctx, cancel := context.WithTimeout(n.ctx, max(n.timeout, node.SetUp()))
	defer cancel()
	ps := node.Sub().Subscribe(context.Background())
	if err := ps.Ping(ctx); err != nil {
		_ = ps.Close() // it has no connection
		n.mu.Lock()
		n.subs[i].timer = nil
		n.failed(i)
		n.mu.Unlock()
		return
	}
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.mu.Lock()
	n.subs[i].timer = nil
	if n.closed || n.subs[i].ps != nil {
		n.mu.Unlock()
		_ = ps.Close() // nothing reads from it yet: no wait
		return
	}
	n.subs[i].ps = ps
	msgs := ps.ChannelWithSubscriptions()
	n.wg.Go(func() {
		for m := range msgs {
			switch m := m.(type) {
			case *redis.Message:
				n.Wake(keyOf(m.Channel))
			case *redis.Subscription:
				n.confirmed(i, ps, keyOf(m.Channel), m.Kind == "subscribe")
			}
		}
	})
	channels := n.channels()
	n.mu.Unlock()
	if len(channels) > 0 {
		n.settled(i, ps, ps.Subscribe(ctx, channels...))
	}
}

// settled records how a call on node i's subscription ps went. An
// (un)subscribe only writes (the replies come to the dispatch goroutine),
// so its error is the connection's: it broke, and go-redis could not make
// another. That drops the subscription; the node is left out for a while.
// A write that went out proves nothing (a node cut off takes them all).
func (n *Notifier) settled(i int, ps *redis.PubSub, err error) {
	if err == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.subs[i].ps != ps {
		return // close ends it
	}
	n.subs[i].ps = nil
	n.failed(i)
	// Its dispatch goroutine ends with it. go-redis's reader may be in a
	// dial, holding what Close needs: Close in the background. active
	// keeps the node, so that the next subscription's confirmations wake
	// the waiters, as after a reconnection (see confirmed).
	n.wg.Go(func() { _ = ps.Close() })
}

// answered notes that node i confirmed a subscription on ps (go-redis
// passes on no pong; a release announcement, the hot path, takes no note):
// the node's waits after failures start again from the shortest; under mu.
func (n *Notifier) answered(i int, ps *redis.PubSub) {
	if n.subs[i].ps == ps {
		n.subs[i].backoff = 0
	}
}

// failed starts node i's wait after a failure, and its timer; under mu.
func (n *Notifier) failed(i int) {
	n.subs[i].backoff = min(max(2*n.subs[i].backoff, subRetryFirst), subRetryMax)
	n.subs[i].retryAt = time.Now().Add(n.subs[i].backoff)
	n.retryLater(i)
}

// channels is the release channel of every key that has waiters; under
// mu.
func (n *Notifier) channels() []string {
	out := make([]string, 0, len(n.waiters))
	for key := range n.waiters {
		out = append(out, wire.ReleaseChannel(key))
	}
	return out
}

// keyOf is the key of a release channel.
func keyOf(channel string) string { return strings.TrimPrefix(channel, wire.ReleaseChannel("")) }

// confirmed notes that node i confirmed key's subscription (on) or its
// end on ps, and wakes key's waiters when releases may have gone
// unannounced (see Notifier).
func (n *Notifier) confirmed(i int, ps *redis.PubSub, key string, on bool) {
	n.mu.Lock()
	n.answered(i, ps)
	nodes := n.active[key]
	if !on || n.waiters[key] == nil {
		delete(nodes, i)
		n.mu.Unlock()
		return
	}
	if nodes == nil {
		nodes = map[int]bool{}
		n.active[key] = nodes
	}
	again, first := nodes[i], len(nodes) == 0
	nodes[i] = true
	n.mu.Unlock()
	if again || first {
		n.Wake(key)
	}
}
