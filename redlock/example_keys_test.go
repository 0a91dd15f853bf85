package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Lock names taken from user input cannot reach the library's own keys:
// names that start with ReservedPrefix are refused before any node is asked.
func ExampleReservedPrefix() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	for _, name := range []string{"redlock:guard:marker", "report:redlock:daily"} {
		err := locker.ForceRelease(ctx, name)
		fmt.Printf("%s: invalid %v\n", name, errors.Is(err, redlock.ErrInvalid))
	}
	// Output:
	// redlock:guard:marker: invalid true
	// report:redlock:daily: invalid false
}

// With a lock-delay, a holder that dies keeps the key from others for the
// delay after its TTL; a release frees it at once.
func ExampleWithLockDelay() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients, redlock.WithTTL(10*time.Second), redlock.WithLockDelay(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lock, err := locker.Obtain(ctx, "nightly-export")
	if err != nil {
		panic(err)
	}
	left, err := lock.TTL(ctx) // the holder's part: the delay is left out
	if err != nil {
		panic(err)
	}
	fmt.Println("TTL at most 10s:", left <= 10*time.Second)
	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
	again, err := locker.TryObtain(ctx, "nightly-export")
	if err != nil {
		panic(err)
	}
	fmt.Println("free again after release:", again.Valid())
	_ = again.Release(ctx)
	// Output:
	// TTL at most 10s: true
	// free again after release: true
}
