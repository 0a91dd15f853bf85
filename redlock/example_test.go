package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

// exampleClients connects to the example servers (three local redis-server
// processes that the tests start; in real use, your independent masters).
func exampleClients() ([]*redis.Client, func()) { return exampleClientsDB(0) }

// exampleClientsDB is exampleClients on database db: an example that leaves
// state behind for good (the restart guard's markers, which Check reads)
// uses its own database, out of the other examples' way.
func exampleClientsDB(db int) ([]*redis.Client, func()) {
	var clients []*redis.Client
	for _, addr := range exampleAddrs {
		clients = append(clients, redis.NewClient(&redis.Options{
			Addr:                  addr,
			DB:                    db,
			ContextTimeoutEnabled: true, // let the lock bound each node call
			MaxRetries:            -1,   // a retried script is a second vote
		}))
	}
	return clients, func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
}

// exampleLocker is a Locker with opts over the example servers; done closes
// it and its clients. Its node timeout is a generous second unless opts say
// otherwise: the example servers share a busy machine, where a one-shot
// call (TryObtain, Inspect, ForceRelease, Bootstrap) must not fail on a
// scheduling hiccup.
func exampleLocker(opts ...redlock.Option) (locker *redlock.Locker, done func()) {
	return exampleLockerDB(0, opts...)
}

// exampleLockerDB is exampleLocker on database db (see exampleClientsDB).
func exampleLockerDB(db int, opts ...redlock.Option) (locker *redlock.Locker, done func()) {
	clients, closeAll := exampleClientsDB(db)
	locker, err := redlock.New(clients, append([]redlock.Option{redlock.WithNodeTimeout(time.Second)}, opts...)...)
	if err != nil {
		panic(err)
	}
	return locker, func() {
		if err := locker.Close(); err != nil {
			panic(err)
		}
		closeAll()
	}
}

// Obtain a lock over three nodes, use it while it is valid, release it.
func Example() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients, redlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lock, err := locker.Obtain(ctx, "invoice:42")
	if err != nil {
		panic(err)
	}
	fmt.Println("held:", lock.Valid())
	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println("held after release:", lock.Valid())
	// Output:
	// held: true
	// held after release: false
}

// TryObtain makes one attempt; the error tells contention from an outage.
func ExampleLocker_TryObtain() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	first, err := locker.TryObtain(ctx, "report:daily", redlock.WithMetadata("host-a"))
	if err != nil {
		panic(err)
	}
	defer first.Release(ctx)

	_, err = locker.TryObtain(ctx, "report:daily")
	switch {
	case errors.Is(err, redlock.ErrNotObtained):
		fmt.Println("busy: someone else runs the report")
	case errors.Is(err, redlock.ErrNoQuorum):
		fmt.Println("outage:", err)
	}
	// Output: busy: someone else runs the report
}

// Do keeps the lock extended while the work runs, and cancels the work's
// context if the lock is lost.
func ExampleLocker_Do() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients, redlock.WithTTL(3*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	err = locker.Do(context.Background(), "migration:2026-11", func(ctx context.Context) error {
		// Long work goes here; check ctx between steps. If the lock is
		// lost, ctx is cancelled and context.Cause(ctx) matches
		// redlock.ErrLockLost.
		fmt.Println("migrating")
		return ctx.Err()
	})
	if errors.Is(err, redlock.ErrLockLost) {
		fmt.Println("lost the lock: the work may be incomplete")
	}
	fmt.Println("err:", err)
	// Output:
	// migrating
	// err: <nil>
}

// Store is a resource protected by fencing tokens: it remembers the highest
// fence it has accepted and rejects writes with older ones, so a holder that
// paused past its lock's validity cannot overwrite the next holder's work.
type Store struct {
	mu      sync.Mutex
	highest uint64
	data    string
}

func (s *Store) Write(fence uint64, data string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence <= s.highest {
		return fmt.Errorf("fence %d is stale (have %d)", fence, s.highest)
	}
	s.highest, s.data = fence, data
	return nil
}

// With fencing on, every holder gets a number larger than every earlier
// holder's; the protected resource checks it on each write.
func ExampleLock_Fence() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients, redlock.WithFencing())
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	store := &Store{}
	a, err := locker.Obtain(ctx, "ledger")
	if err != nil {
		panic(err)
	}
	// Suppose a stalls here past its validity and the lock passes on
	// (simulated by a release).
	if err := a.Release(ctx); err != nil {
		panic(err)
	}
	b, err := locker.Obtain(ctx, "ledger")
	if err != nil {
		panic(err)
	}
	defer b.Release(ctx)

	fmt.Println("b writes:", store.Write(b.Fence(), "b's entry"))
	fmt.Println("a writes:", store.Write(a.Fence(), "a's late entry") != nil)
	// Output:
	// b writes: <nil>
	// a writes: true
}

// Readers share a read-write lock; the writer waits for them, and keeps
// new readers out while it waits.
func ExampleLocker_RWMutex() {
	locker, done := exampleLocker()
	defer done()
	ctx := context.Background()
	catalog := locker.RWMutex("example:catalog")

	r1, err := catalog.RLock(ctx)
	if err != nil {
		panic(err)
	}
	r2, err := catalog.RLock(ctx)
	if err != nil {
		panic(err)
	}
	_, err = catalog.TryLock(ctx)
	fmt.Println("writer beside readers:", errors.Is(err, redlock.ErrNotObtained))
	for _, r := range []*redlock.Lock{r1, r2} {
		if err := r.Release(ctx); err != nil {
			panic(err)
		}
	}
	w, err := catalog.Lock(ctx, redlock.WithFencing())
	if err != nil {
		panic(err)
	}
	fmt.Println("writer in, fenced:", w.Fence() > 0)
	if err := w.Release(ctx); err != nil {
		panic(err)
	}
	// Output:
	// writer beside readers: true
	// writer in, fenced: true
}
