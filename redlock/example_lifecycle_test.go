package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// The owner of a lock takes it again by its token (in a nested call, or in
// another process after a restart): each Lock adds a hold, and the key is
// free only once the last hold is released. Nobody else gets it meanwhile.
func ExampleWithToken() {
	locker, done := exampleLocker()
	defer done()

	ctx := context.Background()
	outer, err := locker.Obtain(ctx, "cart:7")
	if err != nil {
		panic(err)
	}
	inner, err := locker.TryObtain(ctx, "cart:7", redlock.WithToken(outer.Token()))
	if err != nil {
		panic(err)
	}
	// The holds a majority of the nodes report: a call returns once a
	// majority has answered, and the last node's may still be on its way.
	holds := func() int {
		st, err := locker.Inspect(ctx, "cart:7")
		if err != nil {
			panic(err)
		}
		seen := map[int]int{}
		for _, n := range st.Nodes {
			if seen[n.Holds]++; seen[n.Holds] > len(st.Nodes)/2 {
				return n.Holds
			}
		}
		return -1
	}
	fmt.Println("holds:", holds())

	if err := inner.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println("holds after the inner release:", holds())
	_, err = locker.TryObtain(ctx, "cart:7")
	fmt.Println("another owner:", errors.Is(err, redlock.ErrNotObtained))

	if err := outer.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println("holds after the outer release:", holds())
	// Output:
	// holds: 2
	// holds after the inner release: 1
	// another owner: true
	// holds after the outer release: 0
}

// KeepAlive extends a lock while work of unknown length runs, and ends the
// context it returns as soon as the lock is lost, here to an operator's
// ForceRelease, so that the work stops before someone else can hold it.
func ExampleLock_KeepAlive() {
	// The TTL must leave room for retried extensions within the validity:
	// it must exceed twice the node timeout, plus a little.
	ttl := 1500 * time.Millisecond
	locker, done := exampleLocker(redlock.WithTTL(ttl), redlock.WithNodeTimeout(200*time.Millisecond))
	defer done()

	ctx := context.Background()
	lock, err := locker.Obtain(ctx, "reindex")
	if err != nil {
		panic(err)
	}
	held, stop := lock.KeepAlive(ctx)
	defer stop()

	time.Sleep(ttl + ttl/3) // work that outlasts the TTL
	fmt.Println("still held after the TTL:", lock.Valid() && held.Err() == nil)

	if err := locker.ForceRelease(ctx, "reindex"); err != nil {
		panic(err)
	}
	<-held.Done() // the work would check held between its steps
	fmt.Println("lost:", errors.Is(context.Cause(held), redlock.ErrLockLost))
	fmt.Println("valid:", lock.Valid())
	// Output:
	// still held after the TTL: true
	// lost: true
	// valid: false
}

// A job that must run at most once an hour releases with the rest of the
// hour as a cooldown: the key stays on the servers until then, so the next
// run finds it busy.
func ExampleLock_ReleaseAfter() {
	locker, done := exampleLocker()
	defer done()

	ctx := context.Background()
	lock, err := locker.TryObtain(ctx, "hourly-sync")
	if err != nil {
		panic(err)
	}
	// ... the job runs ...
	if err := lock.ReleaseAfter(ctx, time.Hour); err != nil {
		panic(err)
	}
	fmt.Println("released:", !lock.Valid())
	_, err = locker.TryObtain(ctx, "hourly-sync")
	fmt.Println("next run within the hour:", errors.Is(err, redlock.ErrNotObtained))

	// The example's servers are shared: end the cooldown.
	if err := locker.ForceRelease(ctx, "hourly-sync"); err != nil {
		panic(err)
	}
	// Output:
	// released: true
	// next run within the hour: true
}
