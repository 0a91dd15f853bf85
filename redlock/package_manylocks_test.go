package redlock_test

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

var (
	manyLocks = flag.Int("manylocks", 0, "TestManyLiveLocks: how many locks to hold under KeepAlive (0 skips it; try 100000)")
	manyHold  = flag.Duration("manylocks.hold", 3*time.Minute, "TestManyLiveLocks: how long to hold them")
)

// serverInfo reads a numeric INFO field from every server.
func serverInfo(t *testing.T, clients []*redis.Client, section, field string) []float64 {
	t.Helper()
	out := make([]float64, len(clients))
	for i, c := range clients {
		info, err := c.Info(context.Background(), section).Result()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
				if out[i], err = strconv.ParseFloat(v, 64); err != nil {
					t.Fatal(err)
				}
				found = true
			}
		}
		if !found {
			t.Fatalf("no %s in INFO %s", field, section)
		}
	}
	return out
}

// perServer is the mean over the servers of (after - before) / n.
func perServer(before, after []float64, n int) float64 {
	sum := 0.0
	for i := range before {
		sum += after[i] - before[i]
	}
	return sum / float64(len(before)) / float64(n)
}

func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// One process holds many locks (-manylocks, 10^5 for issue 17's figures)
// on five nodes with KeepAlive, TTL 30s and fencing, for -manylocks.hold,
// and loses none. It reports the CPU it used, the client's heap per held
// lock, the servers' memory per lock key and per fencing
// counter. Not in the default suite: it takes minutes.
//
//	go test ./redlock -run TestManyLiveLocks -manylocks=100000 -manylocks.hold=3m -v
func TestManyLiveLocks(t *testing.T) {
	n := *manyLocks
	if n <= 0 {
		t.Skip("set -manylocks=N (e.g. 100000) to run")
	}
	const (
		ttl     = 30 * time.Second
		workers = 64
	)
	servers := redistest.StartT(t, 5, redistest.Options{})
	clients := redistest.ClientsT(t, servers)
	memEmpty := serverInfo(t, clients, "memory", "used_memory")
	l := newLocker(t, clients, redlock.WithTTL(ttl), redlock.WithFencing())
	heapEmpty := heapAfterGC()

	start := time.Now()
	kept := keepMany(t, l, "live", n, workers)
	obtained := time.Since(start)
	heapHeld := heapAfterGC()
	memHeld := serverInfo(t, clients, "memory", "used_memory")
	t.Logf("obtained %d locks in %v", n, obtained.Round(time.Millisecond))

	lost := func() (count int, first string) {
		for _, k := range kept {
			if k.held.Err() != nil {
				if count == 0 {
					first = fmt.Sprintf("%s: %v", k.lock.Key(), context.Cause(k.held))
				}
				count++
			}
		}
		return count, first
	}
	cpu0, wall0 := processCPU(t), time.Now()
	redisUser0 := serverInfo(t, clients, "cpu", "used_cpu_user")
	redisSys0 := serverInfo(t, clients, "cpu", "used_cpu_sys")
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for time.Since(wall0) < *manyHold {
		<-tick.C
		if c, first := lost(); c > 0 {
			t.Fatalf("%d of %d locks lost after %v of holding; first %s", c, n, time.Since(wall0).Round(time.Second), first)
		}
	}
	wall := time.Since(wall0)
	cpu := processCPU(t) - cpu0
	redisUser1 := serverInfo(t, clients, "cpu", "used_cpu_user")
	redisSys1 := serverInfo(t, clients, "cpu", "used_cpu_sys")
	heapEnd := heapAfterGC()
	extended := 0
	for _, k := range kept {
		if k.lock.Until().After(k.obtained) {
			extended++
		}
	}
	count, first := lost()

	for _, k := range kept {
		k.stop()
	}
	var wg sync.WaitGroup
	released := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := kept[i].lock.Release(context.Background()); err != nil {
					released <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(released)
	for err := range released {
		t.Fatal(err)
	}
	// Only the fencing counters are left.
	memCounters := serverInfo(t, clients, "memory", "used_memory")

	// The test's own slice of keptLock is counted out.
	own := float64(unsafe.Sizeof(keptLock{}))
	redisCPU := (perServer(redisUser0, redisUser1, 1) + perServer(redisSys0, redisSys1, 1)) / wall.Seconds()
	t.Logf("held %d locks on 5 nodes (TTL %v, fencing) for %v: %d lost, %d extended at least once", n, ttl, wall.Round(time.Second), count, extended)
	t.Logf("client CPU %v in %v: %.2f%% of one core", cpu.Round(time.Millisecond), wall.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds())
	t.Logf("client heap per held lock (after GC, less the test's own %v B): %.0f B after obtaining, %.0f B at the end of the hold",
		own, float64(heapHeld-heapEmpty)/float64(n)-own, float64(heapEnd-heapEmpty)/float64(n)-own)
	t.Logf("server memory (used_memory, mean of 5): %.1f B per lock key, %.1f B per fencing counter", perServer(memCounters, memHeld, n), perServer(memEmpty, memCounters, n))
	t.Logf("server CPU per server, mean of 5: %.2f%% of one core", 100*redisCPU)
	if count > 0 {
		t.Fatalf("%d of %d locks lost; first %s", count, n, first)
	}
	if extended < n {
		t.Fatalf("only %d of %d locks were extended in %v", extended, n, wall)
	}
	// The CPU share is a figure to report, not asserted: a speed target
	// in a test would fail on a busy machine for reasons of its own.
}
