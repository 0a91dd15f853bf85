package redlock_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// BenchmarkGuardParallel measures the restart guard's cost on throughput:
// 64 goroutines, each on its own key, TryObtain+Release over five nodes,
// with the guard off and on (WithRestartGuard(8s), the cluster
// bootstrapped). It reports the pairs per second and the median time of
// one pair.
func BenchmarkGuardParallel(b *testing.B) {
	for _, guard := range []bool{false, true} {
		b.Run(fmt.Sprintf("nodes=5/workers=64/guard=%v", guard), func(b *testing.B) {
			servers := redistest.StartT(b, 5, redistest.Options{})
			opts := []redlock.Option{redlock.WithNodeTimeout(time.Second)}
			if guard {
				opts = append(opts, redlock.WithRestartGuard(8*time.Second))
			}
			l, err := redlock.New(redistest.ClientsT(b, servers), opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if err := l.Bootstrap(context.Background()); err != nil {
				b.Fatal(err)
			}
			var (
				id    atomic.Int64
				mu    sync.Mutex
				times []time.Duration
			)
			b.ReportAllocs()
			b.ResetTimer() // the servers' start is not the benchmark's
			b.SetParallelism(64 / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("bench:%d", id.Add(1))
				ctx := context.Background()
				var mine []time.Duration
				for pb.Next() {
					start := time.Now()
					if err := obtainRelease(ctx, l, key); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				times = append(times, mine...)
				mu.Unlock()
			})
			if len(times) == 0 {
				return
			}
			slices.Sort(times)
			b.ReportMetric(float64(len(times))/b.Elapsed().Seconds(), "pairs/s")
			b.ReportMetric(float64(times[len(times)/2])/float64(time.Microsecond), "p50-µs")
		})
	}
}
