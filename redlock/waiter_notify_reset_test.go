package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// resetConn is a connection that a node resets as soon as it carries data,
// as a proxy that resets every connection would: the dial succeeds, the
// set-up's first write fails.
type resetConn struct{ net.Conn }

func (c resetConn) Write([]byte) (int, error) {
	_ = c.Conn.Close()
	return 0, &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
}

// Waiters arriving and leaving while a node resets every connection do
// not dial it each time: the release subscription on that node is left
// out for a while after it failed, as the calls' connections are. Each
// waiter's (un)subscription used to dial the node again, with the
// Locker's subscription lock held: in the chaos suite's reset fault that
// was hundreds of dials a second and 63 % of the acquisitions of the
// moment before (100 % with this). Once the node answers again, a waiter is
// subscribed there again.
func TestWaitersLeaveAResettingNodeAlone(t *testing.T) {
	c := newCluster(t, 3)
	var resetting atomic.Bool
	var dials atomic.Int64
	resets := redis.NewClient(&redis.Options{Addr: c.servers[2].Addr, Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil || !resetting.Load() {
			return conn, err
		}
		return resetConn{conn}, nil
	}})
	t.Cleanup(func() { _ = resets.Close() })
	clients := []*redis.Client{c.clients[0], c.clients[1], resets}

	holder := c.locker(t)
	l := newLocker(t, clients, redlock.WithNodeTimeout(200*time.Millisecond))
	resetting.Store(true)
	n, elapsed, waits := waitsOnHeldKeys(t, holder, l, dials.Load)
	// The two queues' workers try a node that refuses about 20 times a
	// second each; the subscription, a few times in all. Without the
	// wait, every Obtain dialled twice: at least 320 here.
	limit := int64(2*2*20*elapsed.Seconds()) + 40
	t.Logf("%d dials of the resetting node in %v for %d waits", n, elapsed.Round(time.Millisecond), waits)
	if n > limit {
		t.Fatalf("%d dials of the resetting node in %v for %d waits, want at most %d", n, elapsed.Round(time.Millisecond), waits, limit)
	}

	// The node answers again: a waiter's subscription reaches it once the
	// wait after its last failure (at most a second) has passed.
	resetting.Store(false)
	got := waiter(t, l, "k0")
	err := redistest.Eventually(t, 5*time.Second, func() error {
		if n := c.subscribers(t, "k0")[2]; n != 1 {
			return fmt.Errorf("node 2 has %d subscribers of k0's releases, want 1", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.ForceRelease(t.Context(), "k0"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// The same with a node that accepts connections and never answers (a
// process stopped behind a live socket, a partition): the subscription's
// connection is tried once at a time. A try that hangs left the node's
// timer free to start another at every wait: hundreds of connections a
// second, each hanging until its set-up's deadline.
func TestWaitersLeaveAHungNodeAlone(t *testing.T) {
	c := newCluster(t, 3)
	hung := redistest.HangT(t)
	silent := redis.NewClient(&redis.Options{Addr: hung.Addr})
	t.Cleanup(func() { _ = silent.Close() })
	holder := c.locker(t)
	l := newLocker(t, []*redis.Client{c.clients[0], c.clients[1], silent}, redlock.WithNodeTimeout(200*time.Millisecond))
	n, elapsed, waits := waitsOnHeldKeys(t, holder, l, func() int64 { return int64(hung.Accepted()) })
	// A dial each for the two queues' workers and the subscription, each
	// hanging until its set-up's deadline (the client's DialTimeout, 5s).
	t.Logf("%d connections to the hung node in %v for %d waits", n, elapsed.Round(time.Millisecond), waits)
	if n > 10 {
		t.Fatalf("%d connections to the hung node in %v for %d waits, want at most 10", n, elapsed.Round(time.Millisecond), waits)
	}
}

// waitsOnHeldKeys has four goroutines make 40 Obtains each, of keys holder
// holds, on l: each finds its key held, waits (subscribing on every node),
// gives up at its 20ms deadline and leaves (unsubscribing). It returns how
// much dials grew meanwhile, how long that took, and the number of waits.
func waitsOnHeldKeys(t *testing.T, holder, l *redlock.Locker, dials func() int64) (n int64, elapsed time.Duration, waits int) {
	t.Helper()
	const waiters, rounds = 4, 40
	for i := range waiters {
		mustObtain(t, holder, fmt.Sprint("k", i), redlock.WithTTL(time.Minute))
	}
	before, start := dials(), time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, waiters*rounds)
	for i := range waiters {
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
				_, err := l.Obtain(ctx, fmt.Sprint("k", i))
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("an Obtain of a held key: %v, want its context's deadline", err)
	}
	return dials() - before, time.Since(start), waiters * rounds
}

// Close while a waiter's unsubscription outlives its node timeout: its
// node's subscription lost its connection, and the new dial is slow to
// fail. The unsubscription then drops the subscription while Close ends
// them all; both must agree on who closes it (the race detector caught
// Close reading the subscriptions unguarded in the chaos suite).
func TestCloseWhileUnsubscribeFails(t *testing.T) {
	c := newCluster(t, 3)
	var slow atomic.Bool
	var slowDials atomic.Int64
	clients := dialClients(t, c.servers, func(context.Context, string) error {
		if !slow.Load() {
			return nil
		}
		slowDials.Add(1)
		// Longer than the node timeout, whatever the dial's deadline:
		// the unsubscription fails after its round has stopped waiting.
		time.Sleep(150 * time.Millisecond)
		return errors.New("refused by the test, slowly")
	})
	l, err := redlock.New(clients, redlock.WithNodeTimeout(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	held := mustObtain(t, c.locker(t), "k", redlock.WithTTL(time.Minute))
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan error, 1)
	go func() {
		_, err := l.Obtain(ctx, "k")
		got <- err
	}()
	c.subscribedEverywhere(t, "k")
	slow.Store(true)
	if err := c.clients[2].ClientKillByFilter(t.Context(), "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	// go-redis's reader notices and dials, slowly, with no connection
	// left; then the waiter leaves.
	if !poll(t, 10*time.Second, func() bool { return slowDials.Load() > 0 }) {
		t.Fatal("no new dial of the subscription in 10s after its connection was killed")
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("Obtain of a held key: %v, want its context's end", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
