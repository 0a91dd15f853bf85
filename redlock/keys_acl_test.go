package redlock_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// A user given exactly ACLRule runs a whole lock lifecycle: Bootstrap (and
// its way out of a quarantine), fenced acquisition under the restart guard
// with the fence written back, Inspect, Extend, TTL, KeepAlive, a waiter
// woken by the release's announcement, an election and ForceRelease,
// without a single refusal (the doctor's TestCheckUnderACLRule does the
// same for its checks).
func TestACLRuleIsEnough(t *testing.T) {
	servers := redistest.StartACLT(t, 3, redistest.Options{}, redlock.ACLRule)
	clients := redistest.ClientsAs(t, servers, "locker", "pw", &redis.Options{}) // go-redis defaults: RESP3, client identity
	opts := []redlock.Option{redlock.WithRestartGuard(time.Minute), redlock.WithTTL(10 * time.Second), redlock.WithFencing()}
	l := newLocker(t, clients, opts...)
	ctx := t.Context()
	if err := l.Bootstrap(ctx, redlock.ClearQuarantine()); err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	// Nodes whose fencing counters disagree: the fence is written back.
	admin := redis.NewClient(&redis.Options{Addr: servers[0].Addr, Username: "admin", Password: "admin"})
	defer admin.Close()
	if err := admin.Set(ctx, redlock.ReservedPrefix+"fence:k", "99999999999999999", 0).Err(); err != nil {
		t.Fatal(err)
	}
	lock, err := l.TryObtain(ctx, "k", redlock.WithMetadata("acl test"))
	if err != nil {
		t.Fatalf("TryObtain: %v", err)
	}
	if lock.Fence() == 0 {
		t.Fatal("no fence")
	}
	if _, err := l.Inspect(ctx, "k"); err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if err := lock.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if _, err := lock.TTL(ctx); err != nil {
		t.Fatalf("TTL: %v", err)
	}
	held, stop := lock.KeepAlive(ctx)
	// A waiter of another Locker, which can only hear of the release from
	// its announcement (or its retry timer, an hour away).
	other := newLocker(t, redistest.ClientsAs(t, servers, "locker", "pw", &redis.Options{}), append(opts, redlock.WithRetry(redlock.LinearBackoff(time.Hour)))...)
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		k, err := other.Obtain(ctx, "k")
		if err == nil {
			err = k.Release(ctx)
		}
		got <- err
	}()
	waitSubscribed(t, admin, "k")
	stop()
	if cause := context.Cause(held); errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("KeepAlive: %v", cause)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter woken by the release: %v", err)
	}
	// A waiter of the same Locker gets the lock handed over in the
	// release's round (handoff.lua).
	first := mustObtain(t, l, "h")
	handed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		k, err := l.Obtain(ctx, "h")
		if err == nil {
			err = k.Release(ctx)
		}
		handed <- err
	}()
	waitSubscribed(t, admin, "h")
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release to a waiter: %v", err)
	}
	if err := <-handed; err != nil {
		t.Fatalf("waiter of the same Locker: %v", err)
	}
	// A script cache flushed behind the library's back: EVAL instead.
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	mustObtain(t, l, "flushed")
	// A node that stops answering: its connections are replaced, the
	// stale one killed on the server (CLIENT KILL) once it answers again.
	if err := servers[0].Pause(); err != nil {
		t.Fatal(err)
	}
	mustObtain(t, l, "paused")
	// Inspect waits for every node: past the paused one's timeout.
	if _, err := l.Inspect(ctx, "paused"); err != nil {
		t.Fatalf("Inspect with a node paused: %v", err)
	}
	if err := servers[0].Resume(); err != nil {
		t.Fatal(err)
	}
	if err := l.ForceRelease(ctx, "paused"); err != nil {
		t.Fatalf("ForceRelease after a pause: %v", err)
	}
	ld, err := l.Campaign(ctx, "election")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if _, err := l.Leader(ctx, "election"); err != nil {
		t.Fatalf("Leader: %v", err)
	}
	if err := ld.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	// Multi-key locks have no fence.
	unfenced := newLocker(t, clients, opts[:2]...)
	multi, err := unfenced.TryObtainMulti(ctx, []string{"a", "b"})
	if err != nil {
		t.Fatalf("TryObtainMulti: %v", err)
	}
	if err := multi.Release(ctx); err != nil {
		t.Fatalf("Release multi: %v", err)
	}
	// A read-write lock: a reader's lease and its index, a writer's
	// look at them, a semaphore's permit.
	rw := l.RWMutex("rw")
	r, err := rw.TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock: %v", err)
	}
	if err := r.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("Extend a lease: %v", err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatalf("Release a lease: %v", err)
	}
	w, err := rw.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatalf("Release the writer: %v", err)
	}
	p, err := l.Semaphore("sem", 2).TryObtain(ctx)
	if err != nil {
		t.Fatalf("Semaphore TryObtain: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatalf("Release a permit: %v", err)
	}
	mustObtain(t, l, "forced")
	if err := l.ForceRelease(ctx, "forced"); err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	// Nothing was refused along the way.
	log, err := admin.Do(ctx, "acl", "log").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(log) > 0 {
		t.Fatalf("ACL LOG shows refusals: %v", log)
	}
}

// waitSubscribed waits, up to 10s, for a subscriber on key's release
// channel on the node admin reaches.
func waitSubscribed(t *testing.T, admin *redis.Client, key string) {
	t.Helper()
	ch := redlock.ReservedPrefix + "released:" + key
	if !poll(t, 10*time.Second, func() bool {
		n, err := admin.PubSubNumSub(t.Context(), ch).Result()
		return err == nil && n[ch] > 0
	}) {
		t.Fatal("the waiter never subscribed")
	}
}

// docs/safety.md gives the rule ACLRule holds, word for word.
func TestACLRuleInDocs(t *testing.T) {
	readme, err := os.ReadFile("../docs/safety.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	if !strings.Contains(text, "ACL SETUSER locker on >PASSWORD "+redlock.ACLRule+"`") {
		t.Fatalf("docs/safety.md does not give ACLRule as it is: %s", redlock.ACLRule)
	}
}
