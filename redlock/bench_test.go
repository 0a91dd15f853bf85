package redlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// BenchmarkObtainRelease measures one uncontended TryObtain+Release over 1, 3
// and 5 local redis-server processes.
func BenchmarkObtainRelease(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			servers := redistest.StartT(b, n, redistest.Options{})
			// A generous node timeout: on a loaded 2-core machine the
			// default 50ms can be missed, and this measures speed.
			l, err := redlock.New(redistest.ClientsT(b, servers), redlock.WithNodeTimeout(time.Second))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			obtainReleaseLoop(b, l, "bench")
		})
	}
}

// BenchmarkObtainReleaseParallel measures throughput: 64 goroutines, each on
// its own key, over five nodes.
func BenchmarkObtainReleaseParallel(b *testing.B) {
	for _, n := range []int{1, 5} {
		b.Run(fmt.Sprintf("nodes=%d/workers=64", n), func(b *testing.B) {
			servers := redistest.StartT(b, n, redistest.Options{})
			// A generous node timeout: this measures throughput, not
			// behaviour under a 50ms budget on a saturated machine.
			l, err := redlock.New(redistest.ClientsT(b, servers), redlock.WithNodeTimeout(time.Second))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			obtainReleaseParallel(b, l)
		})
	}
}

// BenchmarkHandoff measures how long after a release a waiting Obtain (with
// the default retry strategy) gets the lock, with release notifications on
// and off (polling only), and how many scripts the waiter sends per second
// while it waits. The holder releases at a random moment 20-200ms after the
// waiter started waiting.
func BenchmarkHandoff(b *testing.B) {
	for _, notify := range []bool{true, false} {
		b.Run(fmt.Sprintf("notify=%v", notify), func(b *testing.B) {
			servers := redistest.StartT(b, 3, redistest.Options{})
			clients := redistest.ClientsT(b, servers)
			holder, err := redlock.New(clients)
			if err != nil {
				b.Fatal(err)
			}
			defer holder.Close()
			var calls atomic.Int64
			counted := countedClients(b, servers, &calls)
			opts := []redlock.Option{}
			if !notify {
				opts = append(opts, redlock.WithPollingOnly())
			}
			waiter, err := redlock.New(counted, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer waiter.Close()
			ctx := context.Background()
			var handoffs []time.Duration
			var waited time.Duration
			var waitCalls int64
			for b.Loop() {
				held, err := holder.TryObtain(ctx, "handoff")
				if err != nil {
					b.Fatal(err)
				}
				got := make(chan time.Time, 1)
				done := make(chan struct{})
				calls.Store(0)
				start := time.Now()
				go func() {
					defer close(done)
					lock, err := waiter.Obtain(ctx, "handoff")
					got <- time.Now()
					if err != nil {
						b.Error(err)
						return
					}
					if err := lock.Release(ctx); err != nil {
						b.Error(err)
					}
				}()
				<-time.After(20*time.Millisecond + time.Duration(rand.Int64N(int64(180*time.Millisecond))))
				waitCalls += calls.Load()
				waited += time.Since(start)
				released := time.Now()
				if err := held.Release(ctx); err != nil {
					b.Fatal(err)
				}
				handoffs = append(handoffs, (<-got).Sub(released))
				<-done
			}
			slices.Sort(handoffs)
			b.ReportMetric(float64(handoffs[len(handoffs)/2])/float64(time.Millisecond), "p50-handoff-ms")
			b.ReportMetric(float64(handoffs[len(handoffs)*9/10])/float64(time.Millisecond), "p90-handoff-ms")
			b.ReportMetric(float64(waitCalls)/waited.Seconds(), "scripts/s-waiting")
		})
	}
}

// BenchmarkContention measures acquisitions of one key by 16 goroutines of
// one Locker over five nodes, each holding the lock for 1ms: the time per
// acquisition, and the acquisitions per second.
func BenchmarkContention(b *testing.B) {
	servers := redistest.StartT(b, 5, redistest.Options{})
	l, err := redlock.New(redistest.ClientsT(b, servers), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				lock, err := l.Obtain(ctx, "contended")
				if err != nil {
					b.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
				if err := lock.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "acq/s")
}

// BenchmarkGuard measures one uncontended TryObtain+Release with the restart
// guard off and on (WithRestartGuard(8s), the cluster bootstrapped), over 1
// and 5 nodes, and reports the scripts' own time on the servers
// (server-µs/op: EVALSHA time from INFO commandstats per Obtain+Release,
// averaged over the nodes), where the guard's INFO reads are spent.
func BenchmarkGuard(b *testing.B) {
	for _, n := range []int{1, 5} {
		for _, guard := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/guard=%v", n, guard), func(b *testing.B) {
				servers := redistest.StartT(b, n, redistest.Options{})
				clients := redistest.ClientsT(b, servers)
				opts := []redlock.Option{redlock.WithNodeTimeout(time.Second)}
				if guard {
					opts = append(opts, redlock.WithRestartGuard(8*time.Second))
				}
				l, err := redlock.New(clients, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				ctx := context.Background()
				if err := l.Bootstrap(ctx); err != nil {
					b.Fatal(err)
				}
				for _, c := range clients {
					if err := c.ConfigResetStat(ctx).Err(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				for b.Loop() {
					lock, err := l.TryObtain(ctx, "bench")
					if err != nil {
						b.Fatal(err)
					}
					if err := lock.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
				var usec float64
				for _, c := range clients {
					stats, err := c.Info(ctx, "commandstats").Result()
					if err != nil {
						b.Fatal(err)
					}
					// Scripts, and the guard's functions where the server has them.
					for _, cmd := range []string{"evalsha", "fcall"} {
						var calls, total float64
						if i := strings.Index(stats, "cmdstat_"+cmd+":"); i >= 0 {
							_, _ = fmt.Sscanf(stats[i:], "cmdstat_"+cmd+":calls=%g,usec=%g", &calls, &total)
						}
						usec += total
					}
				}
				b.ReportMetric(usec/float64(n)/float64(b.N), "server-µs/op")
			})
		}
	}
}

// obtainReleaseParallel runs Obtain+Release on l from 64 goroutines, each on
// its own key.
func obtainReleaseParallel(b *testing.B, l *redlock.Locker) {
	var id atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64 / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("bench:%d", id.Add(1))
		ctx := context.Background()
		for pb.Next() {
			if err := obtainRelease(ctx, l, key); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// obtainReleaseLoop measures TryObtain+Release of key on l, back to back.
func obtainReleaseLoop(b *testing.B, l *redlock.Locker, key string) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := obtainRelease(ctx, l, key); err != nil {
			b.Fatal(err)
		}
	}
}

// obtainRelease is one pair that the benchmarks measure: one TryObtain of
// key on l, then the lock's Release. It returns the first error.
func obtainRelease(ctx context.Context, l *redlock.Locker, key string) error {
	lock, err := l.TryObtain(ctx, key)
	if err != nil {
		return err
	}
	return lock.Release(ctx)
}
