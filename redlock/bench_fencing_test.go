package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock"
)

// BenchmarkObtainReleaseFencing measures one uncontended TryObtain+Release
// with fencing off and on, over 1, 3 and 5 nodes: what a fence costs.
func BenchmarkObtainReleaseFencing(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		for _, fenced := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/fenced=%v", n, fenced), func(b *testing.B) {
				l := benchLocker(b, n, fenced)
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					lock, err := l.TryObtain(ctx, "bench")
					if err != nil {
						b.Fatal(err)
					}
					if fenced && lock.Fence() == 0 {
						b.Fatal("fenced lock without a fence")
					}
					if err := lock.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkObtainReleaseFencingParallel measures throughput with fencing
// off and on: 64 goroutines, each on its own key.
func BenchmarkObtainReleaseFencingParallel(b *testing.B) {
	for _, n := range []int{1, 5} {
		for _, fenced := range []bool{false, true} {
			b.Run(fmt.Sprintf("nodes=%d/workers=64/fenced=%v", n, fenced), func(b *testing.B) {
				l := benchLocker(b, n, fenced)
				obtainReleaseParallel(b, l)
			})
		}
	}
}

// benchLocker is a Locker over n fresh servers with a generous node timeout
// (on a loaded 2-core machine the default 50ms can be missed, and the
// benchmarks measure speed).
func benchLocker(b *testing.B, n int, fenced bool) *redlock.Locker {
	b.Helper()
	servers := redistest.StartT(b, n, redistest.Options{})
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second)}
	if fenced {
		opts = append(opts, redlock.WithFencing())
	}
	l, err := redlock.New(redistest.ClientsT(b, servers), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := l.Close(); err != nil {
			b.Error(err)
		}
	})
	return l
}

// BenchmarkFloor is what the servers allow an Obtain+Release: two rounds of
// PING to every node, one goroutine per node, each round waiting for a
// majority. A library's ObtainRelease/nodes=N compares against
// Floor/nodes=N.
func BenchmarkFloor(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			clients := redistest.ClientsT(b, redistest.StartT(b, n, redistest.Options{}))
			ctx := context.Background()
			for _, c := range clients {
				if err := c.Ping(ctx).Err(); err != nil { // connect before timing
					b.Fatal(err)
				}
			}
			round := &quorum.Round[struct{}]{
				Nodes:   n,
				Need:    quorum.Majority(n),
				Timeout: time.Second,
				Call: func(ctx context.Context, i int) (quorum.Vote, struct{}, error) {
					return quorum.Yes, struct{}{}, clients[i].Ping(ctx).Err()
				},
			}
			b.ReportAllocs()
			for b.Loop() {
				for range 2 {
					if res := quorum.Run(ctx, round); !res.OK {
						b.Fatalf("ping round failed: %+v", res.Replies)
					}
				}
			}
		})
	}
}
