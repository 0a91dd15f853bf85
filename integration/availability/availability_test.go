// Package availability measures what each fault on a minority costs a
// quorum's rate of acquisitions, fault by fault, with long phases: the
// chaos suite's availability line rests on a few faults of under a second
// each, and one kind moves by 20 to 40 points between its runs.
//
//	go test -count=1 -timeout 30m -run TestAvailability -v ./availability -args -chaos.availability=5s
package availability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/integration/cluster"
	"github.com/quorumlock/redlock/integration/internal/flags"
	"github.com/quorumlock/redlock/redlock"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	// After failed dials a go-redis pool may leave a prober that sleeps a
	// second before it sees its client closed; it is go-redis's, and ends.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// fault is one kind of fault on one node: on starts it, off heals it.
type fault struct {
	name string
	on   func(ctx context.Context, n *cluster.Node) error
}

var faults = []fault{
	{"kill", func(ctx context.Context, n *cluster.Node) error { return n.Kill(ctx) }},
	{"restart", func(ctx context.Context, n *cluster.Node) error {
		// Down for a moment, then back (without its data) for the rest
		// of the phase: what a node that restarted costs while it comes
		// back.
		if err := n.Kill(ctx); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
		return n.Restart(ctx)
	}},
	{"pause", func(ctx context.Context, n *cluster.Node) error { return n.Pause(ctx) }},
	{"blackhole", func(_ context.Context, n *cluster.Node) error { return n.Blackhole() }},
	{"drop-replies", func(_ context.Context, n *cluster.Node) error { return n.DropReplies() }},
	{"latency", func(_ context.Context, n *cluster.Node) error {
		return n.Latency(50*time.Millisecond, 10*time.Millisecond)
	}},
	{"readonly", func(ctx context.Context, n *cluster.Node) error { return n.ReadOnly(ctx) }},
	{"isolate", func(_ context.Context, n *cluster.Node) error { n.Isolate(); return nil }},
	{"reset", func(_ context.Context, n *cluster.Node) error { return n.ResetPeer() }},
}

// TestAvailability runs the chaos suite's workload (four Lockers of 32
// goroutines on 128 keys, holds under 3 ms, half the goroutines waiting in
// Obtain, half making one attempt at a time; the suite's TTL and node
// timeout) on five local servers, and for each fault alternates a phase
// without faults and a phase with the fault on node 5 throughout, three
// times. It reports the rate in each phase and the median of the three
// ratios. It needs -chaos.availability (the phase length).
func TestAvailability(t *testing.T) {
	phase := *flags.Availability
	if phase <= 0 {
		t.Skip("set -chaos.availability=5s (the phase length) to measure")
	}
	const cycles = 3
	ctx := t.Context()
	c, err := cluster.Start(ctx, cluster.Processes{}, 5, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	})
	var acquired, unreleased atomic.Int64
	stop := startWorkload(t, c, &acquired, &unreleased)
	defer stop()
	rate := func(d time.Duration, during func()) float64 {
		start, n := time.Now(), acquired.Load()
		if during != nil {
			during()
		}
		if left := d - time.Since(start); left > 0 {
			time.Sleep(left)
		}
		return float64(acquired.Load()-n) / time.Since(start).Seconds()
	}
	node := c.Nodes[len(c.Nodes)-1]
	rate(time.Second, nil) // warm up
	var summary []string
	unreleasedBefore := unreleased.Load()
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			var ratios []float64
			for range cycles {
				before := rate(phase, nil)
				var ferr error
				during := rate(phase, func() { ferr = f.on(ctx, node) })
				if err := node.Heal(ctx); err != nil {
					t.Fatalf("healing node 5: %v", err)
				}
				if ferr != nil {
					t.Fatal(ferr)
				}
				if before <= 0 {
					t.Fatal("no acquisition in a phase without faults")
				}
				ratios = append(ratios, during/before)
				t.Logf("%.0f/s without, %.0f/s with: %.0f %%", before, during, 100*during/before)
			}
			slices.Sort(ratios)
			summary = append(summary, fmt.Sprintf("%s=%.0f%% (%.0f-%.0f)", f.name, 100*ratios[cycles/2], 100*ratios[0], 100*ratios[cycles-1]))
		})
	}
	t.Logf("availability (median of %d phases of %v, range): %s; %d releases failed", cycles, phase, strings.Join(summary, " "), unreleased.Load()-unreleasedBefore)
}

// startWorkload starts the clients on c; stop ends them and closes their
// Lockers and connections.
// Each lock obtained counts in acquired, each failed release in
// unreleased (its key is left to its TTL: the rate shows what that costs).
func startWorkload(t *testing.T, c *cluster.Cluster, acquired, unreleased *atomic.Int64) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	keys := make([]string, 128)
	for i := range keys {
		keys[i] = fmt.Sprintf("availability:%d", i)
	}
	var wg sync.WaitGroup
	var closers []func() error
	for li := range 4 {
		clients := make([]*redis.Client, len(c.Nodes))
		for j, a := range c.Addrs() {
			clients[j] = cluster.NewClient(a)
			closers = append(closers, clients[j].Close)
		}
		l, err := redlock.New(clients, redlock.WithTTL(*flags.TTL), redlock.WithNodeTimeout(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		closers = append([]func() error{l.Close}, closers...)
		for g := range 32 {
			rng := rand.New(rand.NewPCG(uint64(li), uint64(g)))
			wg.Go(func() {
				for ctx.Err() == nil {
					key := keys[rng.IntN(len(keys))]
					var lock *redlock.Lock
					var err error
					if li%2 == 0 {
						lock, err = l.TryObtain(ctx, key)
					} else {
						octx, cancel := context.WithTimeout(ctx, 2**flags.TTL)
						lock, err = l.Obtain(octx, key)
						cancel()
					}
					if err != nil {
						sleep(ctx, time.Millisecond+time.Duration(rng.IntN(10_000))*time.Microsecond)
						continue
					}
					acquired.Add(1)
					sleep(ctx, time.Duration(rng.IntN(3000))*time.Microsecond)
					if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
						unreleased.Add(1)
					}
				}
			})
		}
	}
	return func() {
		cancel()
		wg.Wait()
		for _, close := range closers {
			if err := close(); err != nil {
				t.Error(err)
			}
		}
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}
