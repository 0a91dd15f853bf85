package redlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Run a scheduler on one instance only: every instance campaigns, the
// leader works until its context ends, then resigns so another instance
// takes over at once. Term is the fencing token for whatever the leader
// writes to.
func ExampleLocker_Campaign() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients, redlock.WithTTL(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lead, err := locker.Campaign(ctx, "scheduler", redlock.WithMetadata("host=a"))
	if err != nil {
		panic(err) // ctx ended, or the nodes are out of reach
	}
	// Work as the leader while lead.Context() lives; it ends, with a
	// cause matching ErrLockLost, before another instance can lead.
	work := func(ctx context.Context, term uint64) error { return ctx.Err() }
	fmt.Println("working as leader:", work(lead.Context(), lead.Term()) == nil)

	now, err := locker.Leader(ctx, "scheduler")
	if err != nil {
		panic(err)
	}
	fmt.Println("leader:", now.Metadata, "same term:", now.Term == lead.Term())

	if err := lead.Resign(ctx); err != nil {
		panic(err)
	}
	now, err = locker.Leader(ctx, "scheduler")
	if err != nil {
		panic(err)
	}
	fmt.Println("leading after Resign:", now.Leading)
	// Output:
	// working as leader: true
	// leader: host=a same term: true
	// leading after Resign: false
}

// Follow who leads: the channel gets the current state, then every change.
func ExampleLocker_Observe() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients, redlock.WithTTL(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	changes, err := locker.Observe(ctx, "reports")
	if err != nil {
		panic(err)
	}
	fmt.Println("leading:", (<-changes).Leading)

	lead, err := locker.Campaign(ctx, "reports", redlock.WithMetadata("host=b"))
	if err != nil {
		panic(err)
	}
	info := <-changes
	fmt.Println("leading:", info.Leading, info.Metadata)
	if err := lead.Resign(ctx); err != nil {
		panic(err)
	}
	fmt.Println("leading:", (<-changes).Leading)
	// Output:
	// leading: false
	// leading: true host=b
	// leading: false
}
