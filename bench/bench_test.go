package main_test

// The harness's scenarios as testing.B benchmarks, for benchstat:
//
//	go test -run '^$' -bench 'ObtainRelease$' -benchmem -count 6 | tee new.txt
//	benchstat -col /impl new.txt
//
// Every benchmark runs each mode on the same local redis-server
// processes, started once for the whole test binary when the first
// benchmark needs them (plain `go test` starts none).

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench/internal/harness"
	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/bench/internal/stats"
	"github.com/quorumlock/redlock/internal/redistest"
)

const (
	workers     = 64 // BenchmarkThroughput: goroutines on distinct keys
	contenders  = 16 // BenchmarkContended: goroutines on one key
	hold        = time.Millisecond
	slowLatency = 2 * time.Millisecond
	faultNode   = 2 // 0-based: in the 3-node and the 5-node sets
)

var (
	clusterOnce sync.Once
	cluster     *harness.Cluster
	clusterErr  error
)

func TestMain(m *testing.M) {
	harness.Quiet()
	code := m.Run()
	if cluster != nil {
		if err := cluster.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing the cluster:", err)
			code = 1
		}
	}
	os.Exit(redistest.LeakCheck(code))
}

func nodes(b *testing.B) *harness.Cluster {
	b.Helper()
	clusterOnce.Do(func() {
		cluster, clusterErr = harness.StartCluster(context.Background(), nil, faultNode)
	})
	if clusterErr != nil {
		b.Fatal(clusterErr)
	}
	return cluster
}

// eachMode runs bench as a sub-benchmark per mode ("impl=redlock/nodes=5"),
// with the mode set up over the direct clients, or over the faulty ones
// (quorum modes only) when faulty is set. Modes without a lock (the floor)
// run only when anyMode is set.
func eachMode(b *testing.B, faulty, anyMode bool, bench func(b *testing.B, impl lockers.Impl)) {
	for _, m := range lockers.Modes() {
		if (faulty && !m.Quorum()) || (!anyMode && !m.Excludes()) {
			continue
		}
		b.Run(m.Name(), func(b *testing.B) {
			c := nodes(b)
			clients := c.Direct
			if faulty {
				clients = c.Faulty
			}
			impl, err := lockers.New(m, clients)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if err := impl.Close(); err != nil {
					b.Error(err)
				}
			})
			bench(b, impl)
		})
	}
}

var keySeq atomic.Uint64

// key returns a key no other benchmark run uses.
func key(b *testing.B) string {
	return fmt.Sprintf("redlock-bench:%s:%d", b.Name(), keySeq.Add(1))
}

// obtainRelease is the uncontended cycle: one goroutine, one key. A failed
// call does not end the benchmark: on a loaded machine a node call can
// time out, which is an outcome to count (the "errors" metric), not a
// broken benchmark.
func obtainRelease(b *testing.B, impl lockers.Impl) {
	ctx := b.Context()
	w := impl.NewWorker()
	k := key(b)
	var errs int
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Lock(ctx, k, true); err != nil {
			errs++
			continue
		}
		if err := w.Unlock(ctx); err != nil {
			errs++
		}
	}
	b.ReportMetric(float64(errs), "errors")
}

// BenchmarkObtainRelease is one Obtain and one Release, uncontended, per
// op: latency and allocations per lock cycle.
func BenchmarkObtainRelease(b *testing.B) { eachMode(b, false, true, obtainRelease) }

// BenchmarkSlowNode is BenchmarkObtainRelease with node 3 answering 2 ms
// late.
func BenchmarkSlowNode(b *testing.B) {
	c := nodes(b)
	c.Proxy.SetDelay(slowLatency)
	b.Cleanup(func() { c.Proxy.SetDelay(0) })
	eachMode(b, true, true, obtainRelease)
}

// BenchmarkNodeDown is BenchmarkObtainRelease with node 3 refusing
// connections.
func BenchmarkNodeDown(b *testing.B) {
	c := nodes(b)
	c.Proxy.Isolate()
	b.Cleanup(func() {
		if err := c.Proxy.Reconnect(); err != nil {
			b.Error(err)
		}
	})
	eachMode(b, true, true, obtainRelease)
}

// BenchmarkThroughput runs Obtain+Release from 64 goroutines, each on its
// own key; ns/op is the inverse of the throughput.
func BenchmarkThroughput(b *testing.B) {
	eachMode(b, false, true, func(b *testing.B, impl lockers.Impl) {
		ctx := b.Context()
		prefix := key(b)
		var id, errs atomic.Int64
		b.SetParallelism(max(1, int(math.Ceil(float64(workers)/float64(runtime.GOMAXPROCS(0))))))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := impl.NewWorker()
			k := fmt.Sprintf("%s:%d", prefix, id.Add(1))
			for pb.Next() {
				if err := w.Lock(ctx, k, true); err != nil {
					errs.Add(1)
					continue
				}
				if err := w.Unlock(ctx); err != nil {
					errs.Add(1)
				}
			}
		})
		b.ReportMetric(float64(errs.Load()), "errors")
	})
}

// BenchmarkContended runs 16 goroutines on one key, each holding the lock
// for 1 ms. ns/op is the time per acquisition; it also reports the p99 of
// the wait for the lock, how many Obtain calls the library gave up on, and
// how many Release calls failed.
func BenchmarkContended(b *testing.B) {
	eachMode(b, false, false, func(b *testing.B, impl lockers.Impl) {
		ctx := b.Context()
		k := key(b)
		var (
			mu         sync.Mutex
			waits      []time.Duration
			gaveUp     atomic.Int64
			unlockErrs atomic.Int64
		)
		b.SetParallelism(max(1, int(math.Ceil(float64(contenders)/float64(runtime.GOMAXPROCS(0))))))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := impl.NewWorker()
			var mine []time.Duration
			for pb.Next() {
				t0 := time.Now()
				if err := w.Lock(ctx, k, true); err != nil {
					gaveUp.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
				time.Sleep(hold)
				if err := w.Unlock(ctx); err != nil {
					// Under this load a node call can time out; the lock
					// then expires by its TTL, which the waits show.
					unlockErrs.Add(1)
				}
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		})
		slices.Sort(waits)
		b.ReportMetric(float64(stats.Percentile(waits, 99))/float64(time.Millisecond), "p99-wait-ms")
		b.ReportMetric(float64(gaveUp.Load()), "gave-up")
		b.ReportMetric(float64(unlockErrs.Load()), "unlock-errors")
	})
}
