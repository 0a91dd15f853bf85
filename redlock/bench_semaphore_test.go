package redlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// BenchmarkSemaphoreTryObtain measures one TryObtain+Release of a permit
// over three local redis-server processes, for semaphores of 1, 8 and 64
// permits, empty and with all permits but one held by another Locker, beside
// a mutex's TryObtain+Release in the same run.
func BenchmarkSemaphoreTryObtain(b *testing.B) {
	servers := redistest.StartT(b, 3, redistest.Options{})
	clients := redistest.ClientsT(b, servers)
	// A generous node timeout: this measures speed (see BenchmarkObtainRelease).
	l, err := redlock.New(clients, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	other, err := redlock.New(clients, redlock.WithNodeTimeout(time.Second), redlock.WithTTL(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	b.Run("mutex", func(b *testing.B) { obtainReleaseLoop(b, l, "bench") })
	for _, size := range []int{1, 8, 64} {
		for _, full := range []bool{false, true} {
			if full && size == 1 {
				continue // one free of one: empty
			}
			fill := "empty"
			if full {
				fill = "one-free"
			}
			b.Run(fmt.Sprintf("size=%d/%s", size, fill), func(b *testing.B) {
				name := fmt.Sprintf("bench-%d-%s", size, fill)
				if full {
					for range size - 1 {
						p, err := other.Semaphore(name, size).TryObtain(ctx)
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() {
							if err := p.Release(ctx); err != nil {
								b.Error(err)
							}
						})
					}
				}
				sem := l.Semaphore(name, size)
				b.ReportAllocs()
				for b.Loop() {
					p, err := sem.TryObtain(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if err := p.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
