package redlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Lock both accounts of a transfer. Each node takes both keys in one step
// or neither, so a transfer the other way round, locking the same keys in
// the other order, waits instead of deadlocking.
func ExampleLocker_ObtainMulti() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients, redlock.WithTTL(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lock, err := locker.ObtainMulti(ctx, []string{"account:alice", "account:bob"})
	if err != nil {
		panic(err)
	}
	fmt.Println("holding:", lock.Keys())

	// The other direction, with one attempt: busy while we hold both.
	_, err = locker.TryObtainMulti(ctx, []string{"account:bob", "account:alice"})
	fmt.Println("other direction:", err != nil)

	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
	other, err := locker.TryObtainMulti(ctx, []string{"account:bob", "account:alice"})
	if err != nil {
		panic(err)
	}
	fmt.Println("after release:", other.Keys())
	if err := other.Release(ctx); err != nil {
		panic(err)
	}
	// Output:
	// holding: [account:alice account:bob]
	// other direction: true
	// after release: [account:bob account:alice]
}
