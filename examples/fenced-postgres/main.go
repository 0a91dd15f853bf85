// Command fenced-postgres protects a PostgreSQL row with a lock's fence:
// a holder that lost its lock (here: one that stalled past its TTL) has
// its late update refused by the database, where the lock alone would
// have let it overwrite the next holder's. Give it a database URL and the
// Redis masters' addresses:
//
//	go run . postgres://postgres@127.0.0.1:5432/postgres 10.0.0.1:6379 10.0.0.2:6379 10.0.0.3:6379
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/fenced"
)

func main() {
	if len(os.Args) < 3 {
		log.Fatal("usage: fenced-postgres DATABASE_URL ADDR...  (one host:port per Redis master)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, os.Stdout, os.Args[1], os.Args[2:]); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer, dbURL string, addrs []string) (err error) {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	fences, err := fenced.NewTable(fenced.DefaultTable)
	if err != nil {
		return err
	}
	// The migrations: the side table of fences, and the protected table.
	for _, q := range []string{
		fences.Schema(),
		`CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL)`,
		`INSERT INTO accounts VALUES ('alice', 100) ON CONFLICT (id) DO UPDATE SET balance = 100`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}

	var clients []*redis.Client
	for _, addr := range addrs {
		client := redis.NewClient(&redis.Options{Addr: addr})
		defer func() { err = errors.Join(err, client.Close()) }()
		clients = append(clients, client)
	}
	locker, err := redlock.New(clients, redlock.WithFencing(),
		redlock.WithRetry(redlock.LinearBackoff(50*time.Millisecond)))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, locker.Close()) }()

	// deposit adds amount to alice's balance under lock's fence: the claim
	// comes first, then the read and the write, all in one transaction.
	deposit := func(lock *redlock.Lock, amount int64) error {
		return fences.Do(ctx, db, nil, lock, func(tx *sql.Tx) error {
			var balance int64
			if err := tx.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = 'alice'`).Scan(&balance); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = $1 WHERE id = 'alice'`, balance+amount)
			return err
		})
	}

	// a takes the lock with a short TTL, then stalls past it (a GC pause,
	// a swapped-out VM): it never notices.
	a, err := locker.Obtain(ctx, "account:alice", redlock.WithTTL(500*time.Millisecond))
	if err != nil {
		return err
	}
	// b takes the lock once a's expired, and deposits 50.
	b, err := locker.Obtain(ctx, "account:alice", redlock.WithTTL(10*time.Second))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Release(context.WithoutCancel(ctx))) }()
	if err := deposit(b, 50); err != nil {
		return err
	}
	fmt.Fprintln(out, "b deposited 50")

	// a wakes up and deposits 10 from what it believes is its lock.
	switch err := deposit(a, 10); {
	case errors.Is(err, fenced.ErrStaleFence):
		fmt.Fprintln(out, "a's late deposit refused: a newer holder wrote first")
	case err != nil:
		return err
	default:
		fmt.Fprintln(out, "a's late deposit applied")
	}

	var balance int64
	if err := db.QueryRowContext(ctx, `SELECT balance FROM accounts WHERE id = 'alice'`).Scan(&balance); err != nil {
		return err
	}
	fmt.Fprintln(out, "balance:", balance)
	return nil
}
