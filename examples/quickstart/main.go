// Command quickstart runs work under a lock over independent Redis masters,
// then takes a lock by hand. Without arguments it starts three local
// redis-server processes on free loopback ports (installing redis-server
// first if it is missing) and stops them at the end; or give it your
// masters' addresses:
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart 10.0.0.1:6379 10.0.0.2:6379 10.0.0.3:6379
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

func main() {
	addrs, stop := os.Args[1:], func() error { return nil }
	if len(addrs) == 0 {
		// No addresses given: three servers of its own (local.go).
		var err error
		if addrs, stop, err = localServers(3, os.Stderr); err != nil {
			log.Fatal(err)
		}
	}
	// At most 10 seconds for the locks and the work under them: Do's fn
	// gets a context derived from this one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := run(ctx, os.Stdout, addrs)
	cancel()
	if err = errors.Join(err, stop()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer, addrs []string) (err error) {
	var clients []*redis.Client
	for _, addr := range addrs {
		// One plain client per master. The Locker opens connections of
		// its own from these options: no retries, every wait bounded by
		// the node timeout.
		client := redis.NewClient(&redis.Options{Addr: addr})
		defer func() { err = errors.Join(err, client.Close()) }()
		clients = append(clients, client)
	}
	locker, err := redlock.New(clients, redlock.WithTTL(30*time.Second))
	if err != nil {
		return err // no clients; a nil, duplicate or non-plain client (cluster, ring, wrapper); a bad option
	}
	defer func() { err = errors.Join(err, locker.Close()) }()

	// Run work under the lock; it is extended while fn runs, and fn's
	// context is cancelled (cause: redlock.ErrLockLost) if the lock is lost.
	err = locker.Do(ctx, "report:daily", func(ctx context.Context) error {
		fmt.Fprintln(out, "building the report")
		return nil
	})
	switch {
	case errors.Is(err, redlock.ErrNotObtained): // someone else holds it
		fmt.Fprintln(out, "someone else builds the report")
	case err != nil:
		// errors.Is(err, redlock.ErrNoQuorum): a majority of nodes is
		// down, err names them; redlock.ErrLockLost: lost while running,
		// the work may be incomplete; or fn's own error.
		return err
	}

	// Or by hand: obtain, use while Valid, release.
	lock, err := locker.Obtain(ctx, "invoice:42", redlock.WithMetadata("worker-7"))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "holding", lock.Key(), "for", lock.Metadata(), "valid:", lock.Valid())
	// Release even if ctx has ended meanwhile.
	if err := lock.Release(context.WithoutCancel(ctx)); err != nil {
		return err // not held any more (expired, or lost to another owner), or no quorum
	}
	fmt.Fprintln(out, "released")
	return nil
}
