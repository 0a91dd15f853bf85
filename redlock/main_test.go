package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/locktest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// exampleAddrs are three servers that the runnable examples use.
var exampleAddrs []string

func TestMain(m *testing.M) {
	redistest.Main(m, 3, &exampleAddrs)
}

// testOpts are generous node timeouts for a loaded machine under -race; the
// tests that are about timeouts set their own.
var testOpts = []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithTTL(10 * time.Second), redlock.WithLogger(slog.New(slog.DiscardHandler))}

type cluster struct {
	servers []*redistest.Server
	clients []*redis.Client
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	servers := redistest.StartT(t, n, redistest.Options{})
	return &cluster{servers: servers, clients: redistest.ClientsT(t, servers)}
}

// locker returns a Locker over the cluster's clients, closed at cleanup.
func (c *cluster) locker(t *testing.T, opts ...redlock.Option) *redlock.Locker {
	t.Helper()
	return newLocker(t, c.clients, opts...)
}

// bootstrapped returns a Locker over the cluster's clients with the
// restart guard (guardOpts, then opts) that has bootstrapped the cluster.
func (c *cluster) bootstrapped(t *testing.T, opts ...redlock.Option) *redlock.Locker {
	t.Helper()
	l := c.locker(t, append(slices.Clone(guardOpts), opts...)...)
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	return l
}

// joinErrs closes errs, whose senders are done, and returns the errors
// it held, joined (nil for none).
func joinErrs(errs chan error) error {
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// newLocker returns a Locker over clients with testOpts and opts, closed at
// cleanup.
func newLocker(t *testing.T, clients []*redis.Client, opts ...redlock.Option) *redlock.Locker {
	t.Helper()
	return locktest.NewT(t, clients, slices.Concat(testOpts, opts)...)
}

// values returns the raw value of key on every node ("" when missing).
func (c *cluster) values(t *testing.T, key string) []string {
	t.Helper()
	out := make([]string, len(c.clients))
	for i := range c.clients {
		out[i] = c.value(t, i, key)
	}
	return out
}

// emptied waits, up to 10s, for every node to hold none of keys, and
// reports whether they all came to. A release returns at a majority; the
// last node's, or a clean-up's, may still be on its way.
func (c *cluster) emptied(t *testing.T, keys ...string) bool {
	t.Helper()
	return c.emptiedWithin(t, 10*time.Second, keys...)
}

// emptiedWithin is emptied with a limit of d, for tests whose keys would
// expire by their TTL after 10s.
func (c *cluster) emptiedWithin(t *testing.T, d time.Duration, keys ...string) bool {
	t.Helper()
	return poll(t, d, func() bool {
		for _, k := range keys {
			for i := range c.clients {
				n, err := c.clients[i].Exists(context.Background(), k).Result()
				if err != nil {
					t.Fatalf("EXISTS %s on node %d: %v", k, i, err)
				}
				if n != 0 {
					return false
				}
			}
		}
		return true
	})
}

// settledHolds waits, up to 10s, for every node to report n holds of key
// through l.Inspect: an acquisition returns at a majority, and the last
// node's call may still be on its way.
func settledHolds(t *testing.T, l *redlock.Locker, key string, n int) {
	t.Helper()
	var last []int
	ok := poll(t, 10*time.Second, func() bool {
		st, err := l.Inspect(context.Background(), key)
		if err != nil {
			t.Fatalf("Inspect %s: %v", key, err)
		}
		last = last[:0]
		for _, ns := range st.Nodes {
			last = append(last, ns.Holds)
		}
		return !slices.ContainsFunc(last, func(h int) bool { return h != n })
	})
	if !ok {
		t.Fatalf("%s: the nodes report %v holds, want %d on each", key, last, n)
	}
}

// value returns the raw value of key on node i ("" when missing; its type
// in angle brackets when it is not a string: an index of leases is a set).
func (c *cluster) value(t *testing.T, i int, key string) string {
	t.Helper()
	v, err := c.clients[i].Get(context.Background(), key).Result()
	if err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE") {
		kind, err := c.clients[i].Type(context.Background(), key).Result()
		if err != nil {
			t.Fatalf("TYPE %s on node %d: %v", key, i, err)
		}
		return "<" + kind + ">"
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s on node %d: %v", key, i, err)
	}
	return v
}

// holders counts the nodes on which the lock's token holds key.
func (c *cluster) holders(t *testing.T, key, token string) int {
	t.Helper()
	n := 0
	for _, v := range c.values(t, key) {
		if len(v) > len(token) && v[:len(token)+1] == token+"\x00" {
			n++
		}
	}
	return n
}

// heldEverywhere waits, up to 10s, for the lock's token to hold key on
// every node, and fails the test if it does not. An acquisition returns at
// a majority; the last node's grant may still be on its way.
func (c *cluster) heldEverywhere(t *testing.T, key, token string) {
	t.Helper()
	if !poll(t, 10*time.Second, func() bool { return c.holders(t, key, token) == len(c.clients) }) {
		t.Fatalf("%s not held on every node: %q", key, c.values(t, key))
	}
}

func mustObtain(t *testing.T, l *redlock.Locker, key string, opts ...redlock.LockOption) *redlock.Lock {
	t.Helper()
	lock, err := l.TryObtain(t.Context(), key, opts...)
	if err != nil {
		t.Fatalf("TryObtain(%q): %v", key, err)
	}
	return lock
}

// dialClients returns clients of servers whose every dial asks gate
// first (an error fails the dial with it), closed at cleanup: the tests'
// way to make a node's new connections slow, refused or hung while the
// connections it has keep working.
func dialClients(t *testing.T, servers []*redistest.Server, gate func(ctx context.Context, addr string) error) []*redis.Client {
	t.Helper()
	clients := make([]*redis.Client, len(servers))
	for i, s := range servers {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if err := gate(ctx, addr); err != nil {
				return nil, err
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}})
		t.Cleanup(func() { _ = clients[i].Close() })
	}
	return clients
}

// slowDial is a dial gate that takes d, unless the caller stops waiting.
func slowDial(d time.Duration) func(ctx context.Context, addr string) error {
	return func(ctx context.Context, _ string) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// subscribedEverywhere waits, up to 10s, for key's release channel to
// have one subscriber on every node (a waiter of one Locker listening),
// and fails the test if it does not.
func (c *cluster) subscribedEverywhere(t *testing.T, key string) {
	t.Helper()
	if !poll(t, 10*time.Second, func() bool {
		return !slices.ContainsFunc(c.subscribers(t, key), func(n int64) bool { return n != 1 })
	}) {
		t.Fatalf("no waiter subscribed on every node: %v subscribers", c.subscribers(t, key))
	}
}

// nodeAnswers is an Observer that passes every node's answer to an
// acquisition of key ("": of any key) on to ch, dropping it when ch is
// full.
type nodeAnswers struct {
	redlock.NopObserver
	key string
	ch  chan<- redlock.NodeEvent
}

func (o nodeAnswers) NodeDone(_ context.Context, e redlock.NodeEvent) {
	if e.Op == redlock.OpObtain && (o.key == "" || e.Key == o.key) {
		select {
		case o.ch <- e:
		default:
		}
	}
}

// awaitAnswer waits, up to 10s, for node's answer with outcome among
// answers, skipping the others, and returns it; it fails the test if none
// comes.
func awaitAnswer(t *testing.T, answers <-chan redlock.NodeEvent, node int, outcome redlock.Outcome) redlock.NodeEvent {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-answers:
			if e.Node == node && e.Outcome == outcome {
				return e
			}
		case <-timeout:
			t.Fatalf("node %d never answered an attempt with outcome %v", node, outcome)
			return redlock.NodeEvent{}
		}
	}
}
