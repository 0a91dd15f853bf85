package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Inspect shows what every node holds for a key: the holder's token and
// metadata, its holds and the time left, or the node's error.
func ExampleLocker_Inspect() {
	locker, done := exampleLocker(redlock.WithTTL(10 * time.Second))
	defer done()

	ctx := context.Background()
	lock, err := locker.TryObtain(ctx, "invoice:42", redlock.WithMetadata("worker-7"))
	if err != nil {
		panic(err)
	}

	st, err := locker.Inspect(ctx, "invoice:42")
	if err != nil {
		panic(err)
	}
	fmt.Println("held by our token:", st.Holder == lock.Token())
	for i, n := range st.Nodes {
		fmt.Printf("node %d: held %v by %s, %d hold, TTL within 10s: %v\n",
			i, n.Held, n.Metadata, n.Holds, n.TTL > 0 && n.TTL <= 10*time.Second)
	}
	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
	// Output:
	// held by our token: true
	// node 0: held true by worker-7, 1 hold, TTL within 10s: true
	// node 1: held true by worker-7, 1 hold, TTL within 10s: true
	// node 2: held true by worker-7, 1 hold, TTL within 10s: true
}

// ForceRelease is the way out of a stuck lock whose owner is gone: it
// deletes the key whoever holds it. An owner still alive finds out at its
// next extension or release.
func ExampleLocker_ForceRelease() {
	locker, done := exampleLocker(redlock.WithTTL(time.Hour))
	defer done()

	ctx := context.Background()
	stuck, err := locker.TryObtain(ctx, "nightly-report") // its owner "dies"
	if err != nil {
		panic(err)
	}
	if err := locker.ForceRelease(ctx, "nightly-report"); err != nil {
		panic(err)
	}
	next, err := locker.TryObtain(ctx, "nightly-report")
	if err != nil {
		panic(err)
	}
	fmt.Println("taken over:", next.Valid())
	if err := next.Release(ctx); err != nil {
		panic(err)
	}
	err = stuck.Release(ctx)
	fmt.Println("old owner's release:", errors.Is(err, redlock.ErrLockNotHeld))
	// Output:
	// taken over: true
	// old owner's release: true
}

// With the restart guard, a node that may have forgotten the locks it
// granted (a restart without persistence, a flush, a failover) stays out of
// every vote for the maximum TTL. A fresh cluster would be treated the same
// way on first use: seed it once with Bootstrap when it is set up.
func ExampleLocker_Bootstrap() {
	// A cluster never used with the guard: database 1 of the example
	// servers (the markers are per database).
	locker, done := exampleLockerDB(1, redlock.WithRestartGuard(time.Minute))
	defer done()

	ctx := context.Background()
	if err := locker.Bootstrap(ctx); err != nil {
		panic(err) // err names the nodes that abstain or cannot be reached
	}
	lock, err := locker.TryObtain(ctx, "deploy")
	if err != nil {
		panic(err)
	}
	fmt.Println("obtained with the guard on:", lock.Valid())
	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
	// Output:
	// obtained with the guard on: true
}
