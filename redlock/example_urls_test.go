package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// Connect with one URL per independent master. The Locker builds the
// clients, sets them up for locking, and closes them on Close.
func ExampleNewFromURLs() {
	urls := []string{
		"redis://" + exampleAddrs[0], // in real use: redis://:password@host:6379/0
		"redis://" + exampleAddrs[1], // or rediss://user:password@host:6380 for TLS
		"redis://" + exampleAddrs[2] + "/0?dial_timeout=1s",
	}
	locker, err := redlock.NewFromURLs(urls, redlock.WithTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lock, err := locker.Obtain(ctx, "invoice:43")
	if err != nil {
		panic(err)
	}
	fmt.Println("quorum:", locker.Quorum(), "held:", lock.Valid())
	if err := lock.Release(ctx); err != nil {
		panic(err)
	}

	// A bad URL is refused with a message that never shows the password.
	_, err = redlock.NewFromURLs([]string{"redis://:pass#word@host:6379"})
	fmt.Println(errors.Is(err, redlock.ErrInvalid))
	fmt.Println(err)
	// Output:
	// quorum: 2 held: true
	// true
	// redlock: urls[0]: node URL redis://xxxxx: malformed URL (percent-encode special characters in the user name and password): want redis://[[user]:password@]host[:port][/db][?option=value...], or rediss:// for TLS
}
