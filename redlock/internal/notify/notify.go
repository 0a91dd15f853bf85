// Package notify wakes the Locker's waiting calls when a holder releases
// a key they wait for, rather than only on their retry timers.
package notify

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Notifier lets waiting Obtain calls wake up when a holder releases, instead
// of only on their retry timer. The release script publishes on a channel per
// key; the notifier keeps one subscription per node for the whole Locker,
// subscribes a key's channel while anyone waits for it, and wakes every waiter
// of a key when any node announces its release. Timers stay as the fallback
// for lost notifications and for locks that expire instead of being released.
type Notifier struct {
	nodes []Node
	bg    *sync.WaitGroup // the Locker's: tracks (un)subscribe calls that outlive their timeout

	// subMu serialises the (un)subscribe traffic so that a key's channel is
	// subscribed exactly while it has waiters; mu guards the maps and is
	// never held across I/O.
	subMu   sync.Mutex
	mu      sync.Mutex
	subs    []nodeSub       // one per node, under mu
	timeout time.Duration   // the node timeout, for the timers' tries
	ctx     context.Context // ended by close, for the timers' tries
	cancel  context.CancelFunc
	waiters map[string]map[chan struct{}]struct{}
	// active holds, for each key with waiters, the nodes that confirmed
	// its subscription.
	active map[string]map[int]bool
	closed bool
	wg     sync.WaitGroup
}

// New returns the Notifier of nodes. bg is the Locker's group of work
// that outlives its call: the notifier counts its (un)subscribe calls
// there. timeout is the node timeout, which bounds each call.
func New(nodes []Node, bg *sync.WaitGroup, timeout time.Duration) *Notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &Notifier{
		nodes: nodes, bg: bg, timeout: timeout, ctx: ctx, cancel: cancel, subs: make([]nodeSub, len(nodes)),
		waiters: map[string]map[chan struct{}]struct{}{}, active: map[string]map[int]bool{},
	}
}

// Node is what the notifier needs of a node: the client it subscribes
// with, and how long a new connection to it may take to come up.
type Node interface {
	Sub() *redis.Client
	SetUp() time.Duration
}

// Wait registers a waiter for key and makes sure the key's channel is
// subscribed on every node that can be reached within timeout. The returned
// channel receives a value when a node announces the key's release; stop
// must be called when the waiter is done.
func (n *Notifier) Wait(ctx context.Context, key string, timeout time.Duration) (wake <-chan struct{}, stop func()) {
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
		// A node we cannot subscribe on just does not wake us; the
		// timer does.
		n.each(ctx, timeout, true, func(ctx context.Context, ps *redis.PubSub) error {
			return ps.Subscribe(ctx, wire.ReleaseChannel(key))
		})
	}
	return ch, func() { n.leave(ctx, key, ch, timeout) }
}

// leave ends the waiter ch of key, and unsubscribes key's channel on
// every node once it was the last.
func (n *Notifier) leave(ctx context.Context, key string, ch chan struct{}, timeout time.Duration) {
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
		n.each(context.WithoutCancel(ctx), timeout, false, func(ctx context.Context, ps *redis.PubSub) error {
			return ps.Unsubscribe(ctx, wire.ReleaseChannel(key))
		})
	}
}

// WaitAny is Wait for every one of keys: the returned channel receives a
// value when any of them is released; stop ends it. One key is Wait's own.
// For several keys, it runs a goroutine per key that passes its wake-ups
// on, which stop ends and waits for.
func (n *Notifier) WaitAny(ctx context.Context, keys []string, timeout time.Duration) (wake <-chan struct{}, stop func()) {
	if len(keys) == 1 {
		return n.Wait(ctx, keys[0], timeout)
	}
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	var (
		wg    sync.WaitGroup
		stops []func()
	)
	for _, key := range keys {
		w, stop := n.Wait(ctx, key, timeout)
		stops = append(stops, stop)
		wg.Go(func() {
			for {
				select {
				case <-w:
					select {
					case out <- struct{}{}:
					default:
					}
				case <-done:
					return
				}
			}
		})
	}
	return out, func() {
		close(done)
		wg.Wait()
		for _, stop := range stops {
			stop()
		}
	}
}

// Wake wakes every waiter of key (a release of it was announced).
func (n *Notifier) Wake(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.waiters[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Close ends every subscription and waits for the dispatch goroutines.
func (n *Notifier) Close() {
	n.cancel()
	n.subMu.Lock()
	n.mu.Lock()
	n.closed = true
	// Taken under mu: a call that outlived its timeout may still drop one
	// (see settled, which leaves them to this once closed).
	subs := make([]*redis.PubSub, 0, len(n.subs))
	for _, sub := range n.subs {
		subs = append(subs, sub.ps)
		if sub.timer != nil && sub.timer.Stop() {
			n.wg.Done()
		}
	}
	n.mu.Unlock()
	n.subMu.Unlock()
	for _, ps := range subs {
		if ps != nil {
			_ = ps.Close()
		}
	}
	n.wg.Wait()
}
