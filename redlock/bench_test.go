package redlock_test

import (
	"context"
	"fmt"
	"runtime"
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
			ctx := context.Background()
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
			var id atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(64 / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("bench:%d", id.Add(1))
				ctx := context.Background()
				for pb.Next() {
					lock, err := l.TryObtain(ctx, key)
					if err != nil {
						b.Error(err)
						return
					}
					if err := lock.Release(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
