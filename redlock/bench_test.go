package redlock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// BenchmarkObtainRelease measures one uncontended TryObtain+Release over 1, 3
// and 5 local redis-server processes.
func BenchmarkObtainRelease(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			servers := redistest.StartT(b, n, redistest.Options{})
			l, err := redlock.New(redistest.ClientsT(b, servers))
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
