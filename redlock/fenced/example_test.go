package fenced_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/fenced"
)

// A holder that lost its lock comes back after the next holder wrote: its
// write to the Redis key is refused.
func ExampleSetString() {
	ctx := context.Background()
	var clients []*redis.Client
	for _, addr := range exampleAddrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients = append(clients, c)
	}
	locker, err := redlock.New(clients, redlock.WithFencing())
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	resource := clients[0] // the Redis that holds the protected key

	a, err := locker.Obtain(ctx, "example:report")
	if err != nil {
		panic(err)
	}
	// Suppose a stalls here past its validity and the lock passes on
	// (simulated by a release).
	if err := a.Release(ctx); err != nil {
		panic(err)
	}
	b, err := locker.Obtain(ctx, "example:report")
	if err != nil {
		panic(err)
	}
	defer b.Release(ctx)

	fmt.Println("b writes:", fenced.SetString(ctx, resource, b, "example:report:body", "b's report", time.Hour))
	err = fenced.SetString(ctx, resource, a, "example:report:body", "a's late report", time.Hour)
	fmt.Println("a's late write refused:", errors.Is(err, fenced.ErrStaleFence))
	value, _, err := fenced.GetString(ctx, resource, "example:report:body")
	fmt.Println(value, err)
	// Output:
	// b writes: <nil>
	// a's late write refused: true
	// b's report <nil>
}

// A deposit under a lock's fence: the claim, then the read and the write,
// in one transaction. db is opened with a PostgreSQL driver (pgx's
// "github.com/jackc/pgx/v5/stdlib" or lib/pq), and the side table created
// with Schema's migration.
func ExampleTable_Do() {
	ctx := context.Background()
	var db *sql.DB         // sql.Open("pgx", url)
	var lock *redlock.Lock // obtained WithFencing
	fences, err := fenced.NewTable(fenced.DefaultTable)
	if err != nil {
		panic(err)
	}
	err = fences.Do(ctx, db, nil, lock, func(tx *sql.Tx) error {
		var balance int64
		if err := tx.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = $1`, "alice").Scan(&balance); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = $1 WHERE id = $2`, balance+10, "alice")
		return err
	})
	switch {
	case errors.Is(err, fenced.ErrStaleFence):
		// A newer holder wrote first; nothing was applied.
	case errors.Is(err, fenced.ErrConflict):
		// REPEATABLE READ or SERIALIZABLE: run the transaction again.
	case err != nil:
		// The database's error, or the function's.
	}
}
