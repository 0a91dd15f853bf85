package fenced_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
)

// BenchmarkUpdate compares one fenced update of a row with plain ones on
// the same database, one writer at a time: plain is an UPDATE on its own
// (autocommit), plain-tx the same in BEGIN/COMMIT, fenced-column one
// UPDATE that checks and raises a fence column of the row, and
// fenced-table Table.Do (BEGIN, the claim, the UPDATE, COMMIT).
func BenchmarkUpdate(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	if _, err := e.db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id, v, fence) VALUES (1, 0, 0)", e.data)); err != nil {
		b.Fatal(err)
	}
	// Every statement takes its row's id as an argument, so that all go
	// the same way through the driver (prepared and cached).
	update := fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = $1", e.data)
	updateFenced := fmt.Sprintf("UPDATE %s SET v = v + 1, fence = $2 WHERE id = $1 AND fence <= $2", e.data)
	h := holder{"bench", 1}
	exec := func(b *testing.B, q string, args ...any) {
		res, err := e.db.ExecContext(ctx, q, args...)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			b.Fatalf("%d rows, %v", n, err)
		}
	}
	b.Run("kind=plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			exec(b, update, 1)
		}
	})
	b.Run("kind=plain-tx", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tx, err := e.db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, update, 1); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kind=fenced-column", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			exec(b, updateFenced, 1, int64(h.fence))
		}
	})
	b.Run("kind=fenced-table", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			err := e.fences.Do(ctx, e.db, nil, h, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, update, 1)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
