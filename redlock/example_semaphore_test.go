package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// At most two exports run at once, across every process that uses the
// semaphore "exports" with size 2. A permit is a Lock: release it when done.
func ExampleSemaphore() {
	clients, closeAll := exampleClients()
	defer closeAll()
	locker, err := redlock.New(clients, redlock.WithTTL(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	exports := locker.Semaphore("exports", 2)
	first, err := exports.Obtain(ctx)
	if err != nil {
		panic(err)
	}
	second, err := exports.Obtain(ctx)
	if err != nil {
		panic(err)
	}
	_, err = exports.TryObtain(ctx)
	fmt.Println("third while two run:", errors.Is(err, redlock.ErrNotObtained))

	// A user that thinks the semaphore is larger is refused.
	_, err = locker.Semaphore("exports", 3).TryObtain(ctx)
	fmt.Println("size 3:", errors.Is(err, redlock.ErrInvalid))

	if err := first.Release(ctx); err != nil {
		panic(err)
	}
	third, err := exports.TryObtain(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("after a release:", third.Valid())
	for _, p := range []*redlock.Lock{second, third} {
		if err := p.Release(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// third while two run: true
	// size 3: true
	// after a release: true
}
