package fenced_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/locktest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/fenced"
)

// holder is a Holder with a fence chosen by the test.
type holder struct {
	key   string
	fence uint64
}

func (h holder) Key() string   { return h.key }
func (h holder) Fence() uint64 { return h.fence }

// lostAndRetaken returns a lock a whose hold ran out while it did nothing
// (a holder paused past its validity) and the lock b that took key next.
func lostAndRetaken(t *testing.T, l *redlock.Locker, key string) (a, b *redlock.Lock) {
	t.Helper()
	ctx := redistest.BoundedCtx(t)
	a, err := l.Obtain(ctx, key, redlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// b waits until a's keys expire: a is paused past its validity.
	b, err = l.Obtain(ctx, key, redlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Release(context.Background()) })
	if a.Valid() {
		t.Fatal("a is still valid after b obtained the lock")
	}
	if b.Fence() <= a.Fence() {
		t.Fatalf("b's fence %d is not above a's %d", b.Fence(), a.Fence())
	}
	return a, b
}

func TestSetStringRefusesPausedHolder(t *testing.T) {
	l := locktest.FencedT(t)
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	ctx := t.Context()
	a, b := lostAndRetaken(t, l, "ledger")

	if err := fenced.SetString(ctx, c, b, "resource", "b", 0); err != nil {
		t.Fatalf("b's write: %v", err)
	}
	err := fenced.SetString(ctx, c, a, "resource", "a, late", 0)
	if !errors.Is(err, fenced.ErrStaleFence) {
		t.Fatalf("a's late write: %v, want ErrStaleFence", err)
	}
	v, f, err := fenced.GetString(ctx, c, "resource")
	if err != nil || v != "b" || f != b.Fence() {
		t.Fatalf("GetString = %q, %d, %v; want \"b\", %d", v, f, err, b.Fence())
	}
}

func TestSetFieldRefusesPausedHolder(t *testing.T) {
	l := locktest.FencedT(t)
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	ctx := t.Context()
	a, b := lostAndRetaken(t, l, "ledger")

	if err := fenced.SetField(ctx, c, b, "account", "balance", "150"); err != nil {
		t.Fatalf("b's write: %v", err)
	}
	if err := fenced.SetField(ctx, c, a, "account", "balance", "110"); !errors.Is(err, fenced.ErrStaleFence) {
		t.Fatalf("a's late write: %v, want ErrStaleFence", err)
	}
	// Another field keeps its own fence: a may still write one nobody
	// newer wrote.
	if err := fenced.SetField(ctx, c, a, "account", "note", "a"); err != nil {
		t.Fatalf("a's write of another field: %v", err)
	}
	v, f, err := fenced.GetField(ctx, c, "account", "balance")
	if err != nil || v != "150" || f != b.Fence() {
		t.Fatalf("GetField = %q, %d, %v; want \"150\", %d", v, f, err, b.Fence())
	}
}

// Fences compare as numbers of any length, accept an equal fence (the
// same holder writing again) and refuse a lower one.
func TestSetStringOrder(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	ctx := t.Context()
	steps := []struct {
		fence uint64
		ok    bool
	}{
		{9, true},
		{9, true},
		{10, true}, // longer, though "10" < "9" as text
		{9, false},
		{1<<53 + 1, true}, // beyond a double's exact integers
		{1 << 53, false},
		{math.MaxInt64, true},
		{math.MaxInt64 - 1, false},
	}
	for i, s := range steps {
		err := fenced.SetString(ctx, c, holder{"k", s.fence}, "key", strconv.Itoa(i), 0)
		if s.ok != (err == nil) || (err != nil && !errors.Is(err, fenced.ErrStaleFence)) {
			t.Errorf("step %d: fence %d: %v, want accepted=%v", i, s.fence, err, s.ok)
		}
	}
	if _, f, err := fenced.GetString(ctx, c, "key"); err != nil || f != math.MaxInt64 {
		t.Errorf("stored fence %d, %v; want %d", f, err, uint64(math.MaxInt64))
	}
}

func TestSetStringInvalid(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	ctx := t.Context()
	if err := c.Set(ctx, "plain", "no fence here", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, "plainhash", "f", "7").Err(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
	}{
		{"no fence", fenced.SetString(ctx, c, holder{"k", 0}, "x", "v", 0)},
		{"fence above int64", fenced.SetString(ctx, c, holder{"k", math.MaxUint64}, "x", "v", 0)},
		{"negative ttl", fenced.SetString(ctx, c, holder{"k", 1}, "x", "v", -time.Second)},
		{"plain value", fenced.SetString(ctx, c, holder{"k", 1}, "plain", "v", 0)},
		{"plain field", fenced.SetField(ctx, c, holder{"k", 1}, "plainhash", "f", "v")},
		{"nil holder", fenced.SetField(ctx, c, nil, "x", "f", "v")},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, fenced.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, tc.err)
		}
	}
	if v, _ := c.Get(ctx, "plain").Result(); v != "no fence here" {
		t.Errorf("a refused write changed the plain value to %q", v)
	}
	if _, _, err := fenced.GetString(ctx, c, "plain"); !errors.Is(err, fenced.ErrInvalid) {
		t.Errorf("GetString of a plain value: %v, want ErrInvalid", err)
	}
	if _, _, err := fenced.GetString(ctx, c, "missing"); !errors.Is(err, redis.Nil) {
		t.Errorf("GetString of a missing key: %v, want redis.Nil", err)
	}
}

func TestSetStringTTL(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	ctx := t.Context()
	if err := fenced.SetString(ctx, c, holder{"k", 5}, "key", "v", time.Hour); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctx, "key").Result()
	if err != nil || ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("PTTL = %v, %v; want about an hour", ttl, err)
	}
}

// Many writers with random fences race on one key and one field: what
// stays is the highest fence's value, and every write a higher fence had
// already superseded was refused.
func TestSetConcurrentKeepsHighest(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	ctx := t.Context()
	const writers = 200
	fences := rand.Perm(writers)
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for _, f := range fences {
		wg.Go(func() {
			h := holder{"k", uint64(f + 1)}
			v := strconv.Itoa(f + 1)
			if err := fenced.SetString(ctx, c, h, "key", v, 0); err != nil && !errors.Is(err, fenced.ErrStaleFence) {
				errs <- err
			}
			if err := fenced.SetField(ctx, c, h, "hash", "f", v); err != nil && !errors.Is(err, fenced.ErrStaleFence) {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v, f, err := fenced.GetString(ctx, c, "key"); err != nil || v != strconv.Itoa(writers) || f != writers {
		t.Errorf("GetString = %q, %d, %v; want the highest fence's", v, f, err)
	}
	if v, f, err := fenced.GetField(ctx, c, "hash", "f"); err != nil || v != strconv.Itoa(writers) || f != writers {
		t.Errorf("GetField = %q, %d, %v; want the highest fence's", v, f, err)
	}
}

// startCluster starts a Redis Cluster of n masters, the slots split
// between them, and returns a client of it, closed at cleanup.
func startCluster(t *testing.T, n int) *redis.ClusterClient {
	t.Helper()
	servers := redistest.StartT(t, n, redistest.Options{Args: []string{"--cluster-enabled", "yes"}})
	ctx := t.Context()
	for i, s := range servers {
		c := s.NewClient()
		defer c.Close()
		lo, hi := i*16384/n, (i+1)*16384/n-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			host, port, _ := net.SplitHostPort(servers[0].Addr)
			if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	addrs := make([]string, n)
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRedirects: 3})
	t.Cleanup(func() { _ = cc.Close() })
	// The cluster is ready when every node sees every slot served.
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range servers {
		c := s.NewClient()
		defer c.Close()
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ready: %q, %v", info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cc.ReloadState(ctx)
	return cc
}

// On a cluster each key's fence is in its value, so in its slot: the
// scripts run on whichever master owns the key.
func TestSetOnCluster(t *testing.T) {
	cc := startCluster(t, 3)
	ctx := t.Context()
	keys := []string{"a", "b", "c", "{user1}:balance", "{user1}:history"}
	slots := map[int64]bool{}
	for _, k := range keys {
		slot, err := cc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot*3/16384] = true
		if err := fenced.SetString(ctx, cc, holder{"k", 20}, k, "new", 0); err != nil {
			t.Fatalf("SetString(%s): %v", k, err)
		}
		if err := fenced.SetString(ctx, cc, holder{"k", 10}, k, "old", 0); !errors.Is(err, fenced.ErrStaleFence) {
			t.Fatalf("stale SetString(%s): %v, want ErrStaleFence", k, err)
		}
		if err := fenced.SetField(ctx, cc, holder{"k", 20}, k+":h", "f", "new"); err != nil {
			t.Fatalf("SetField(%s): %v", k, err)
		}
		if err := fenced.SetField(ctx, cc, holder{"k", 10}, k+":h", "f", "old"); !errors.Is(err, fenced.ErrStaleFence) {
			t.Fatalf("stale SetField(%s): %v, want ErrStaleFence", k, err)
		}
		if v, f, err := fenced.GetString(ctx, cc, k); err != nil || v != "new" || f != 20 {
			t.Fatalf("GetString(%s) = %q, %d, %v", k, v, f, err)
		}
	}
	if len(slots) < 2 {
		t.Fatalf("the keys all went to one shard: %v", slots)
	}
}
