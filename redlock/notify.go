package redlock

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
)

// notifier lets waiting Obtain calls wake up when a holder releases, instead
// of only on their retry timer. The release script publishes on a channel per
// key; the notifier keeps one subscription per node for the whole Locker,
// subscribes a key's channel while anyone waits for it, and wakes every waiter
// of a key when any node announces its release. Timers stay as the fallback
// for lost notifications and for locks that expire instead of being released.
type notifier struct {
	nodes []node
	bg    *sync.WaitGroup // the Locker's: tracks (un)subscribe calls that outlive their timeout

	// subMu serialises the (un)subscribe traffic so that a key's channel is
	// subscribed exactly while it has waiters; mu guards the maps and is
	// never held across I/O.
	subMu   sync.Mutex
	mu      sync.Mutex
	subs    []*redis.PubSub
	waiters map[string]map[chan struct{}]struct{}
	// active holds, for each key with waiters, the nodes that confirmed
	// its subscription.
	active map[string]map[int]bool
	closed bool
	wg     sync.WaitGroup
}

func newNotifier(nodes []node, bg *sync.WaitGroup) *notifier {
	return &notifier{nodes: nodes, bg: bg, subs: make([]*redis.PubSub, len(nodes)), waiters: map[string]map[chan struct{}]struct{}{}, active: map[string]map[int]bool{}}
}

// wait registers a waiter for key and makes sure the key's channel is
// subscribed on every node that can be reached within timeout. The returned
// channel receives a value when a node announces the key's release; stop
// must be called when the waiter is done.
func (n *notifier) wait(ctx context.Context, key string, timeout time.Duration) (wake <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ch, func() {}
	}
	set := n.waiters[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		n.waiters[key] = set
	}
	set[ch] = struct{}{}
	first := len(set) == 1
	n.mu.Unlock()
	if first {
		n.each(ctx, timeout, func(ctx context.Context, ps *redis.PubSub) {
			// A node we cannot subscribe on just does not wake us; the
			// timer does.
			_ = ps.Subscribe(ctx, releaseChannel(key))
		})
	}
	return ch, func() { n.leave(ctx, key, ch, timeout) }
}

func (n *notifier) leave(ctx context.Context, key string, ch chan struct{}, timeout time.Duration) {
	n.subMu.Lock()
	defer n.subMu.Unlock()
	n.mu.Lock()
	set := n.waiters[key]
	delete(set, ch)
	last := len(set) == 0
	if last {
		delete(n.waiters, key)
		delete(n.active, key)
	}
	closed := n.closed
	n.mu.Unlock()
	if last && !closed {
		n.each(context.WithoutCancel(ctx), timeout, func(ctx context.Context, ps *redis.PubSub) {
			_ = ps.Unsubscribe(ctx, releaseChannel(key))
		})
	}
}

// each runs fn on every node's subscription (created on first use) in
// parallel, each bounded by the node timeout.
func (n *notifier) each(ctx context.Context, timeout time.Duration, fn func(context.Context, *redis.PubSub)) {
	quorum.Each(ctx, len(n.nodes), timeout, n.bg, func(ctx context.Context, i int) {
		if ps := n.sub(i); ps != nil {
			fn(ctx, ps)
		}
	})
}

// sub returns node i's subscription, creating it and its dispatch goroutine
// on first use; nil after close. It is made on the pipe's own subscription
// client, whose every wait is bounded by the node timeout: a hung node then
// holds up neither a waiter nor close.
func (n *notifier) sub(i int) *redis.PubSub {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	if n.subs[i] != nil {
		return n.subs[i]
	}
	ps := n.nodes[i].pipe.Sub().Subscribe(context.Background())
	n.subs[i] = ps
	msgs := ps.ChannelWithSubscriptions()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for m := range msgs {
			switch m := m.(type) {
			case *redis.Message:
				n.wake(keyOf(m.Channel))
			case *redis.Subscription:
				n.confirmed(i, keyOf(m.Channel), m.Kind == "subscribe")
			}
		}
	}()
	return ps
}

// keyOf is the key of a release channel.
func keyOf(channel string) string { return strings.TrimPrefix(channel, releaseChannel("")) }

// confirmed notes that node i confirmed key's subscription (on) or its
// end, and wakes key's waiters when releases may have gone unannounced
// (see notifier).
func (n *notifier) confirmed(i int, key string, on bool) {
	n.mu.Lock()
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
		n.wake(key)
	}
}

func (n *notifier) wake(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// close ends every subscription and waits for the dispatch goroutines.
func (n *notifier) close() {
	n.subMu.Lock()
	n.mu.Lock()
	n.closed = true
	subs := n.subs
	n.mu.Unlock()
	n.subMu.Unlock()
	for _, ps := range subs {
		if ps != nil {
			_ = ps.Close()
		}
	}
	n.wg.Wait()
}
