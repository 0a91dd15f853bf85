// Package fenced_test checks the fenced package's SQL helper on a real
// PostgreSQL, with fences from real Lockers on real redis-server nodes.
package fenced_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/pgtest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock/fenced"
)

// pg is the package's one PostgreSQL server; each test has tables of its
// own.
var pg *pgtest.Server

func TestMain(m *testing.M) {
	redis.SetLogger(redistest.QuietLogger{})
	s, err := pgtest.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pg = s
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping postgres:", err)
		code = 1
	}
	os.Exit(redistest.LeakCheck(code))
}

var tables atomic.Int64

// env is one test's database handle, side table and data table.
type env struct {
	db     *sql.DB
	fences *fenced.Table
	data   string // a table (id BIGINT PRIMARY KEY, v BIGINT, fence BIGINT)
	log    string // a table (seq BIGSERIAL, key TEXT, fence BIGINT): one row per applied write
}

// newEnv opens the database and creates a fresh side table and data
// table through Schema's migration.
func newEnv(t testing.TB) *env {
	t.Helper()
	db, err := sql.Open("pgx", pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	n := tables.Add(1)
	f, err := fenced.NewTable(fmt.Sprintf("fences_%d", n))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, fences: f, data: fmt.Sprintf("data_%d", n), log: fmt.Sprintf("applied_%d", n)}
	for _, q := range []string{
		f.Schema(),
		fmt.Sprintf("CREATE TABLE %s (id BIGINT PRIMARY KEY, v BIGINT NOT NULL, fence BIGINT NOT NULL)", e.data),
		fmt.Sprintf("CREATE TABLE %s (seq BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, fence BIGINT NOT NULL)", e.log),
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return e
}

// write is a holder's read-modify-write under its fence: it reads row
// id's v (0 when missing), writes v+delta with its fence (inserting the
// row when missing), and logs the write.
func (e *env) write(ctx context.Context, opts *sql.TxOptions, h fenced.Holder, id, delta int64) error {
	return e.fences.Do(ctx, e.db, opts, h, func(tx *sql.Tx) error {
		return e.writeIn(ctx, tx, h, id, delta)
	})
}

func (e *env) writeIn(ctx context.Context, tx *sql.Tx, h fenced.Holder, id, delta int64) error {
	var v int64
	err := tx.QueryRowContext(ctx, fmt.Sprintf("SELECT v FROM %s WHERE id = $1", e.data), id).Scan(&v)
	switch {
	case err == sql.ErrNoRows:
		_, err = tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (id, v, fence) VALUES ($1, $2, $3)", e.data), id, delta, int64(h.Fence()))
	case err == nil:
		_, err = tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET v = $2, fence = $3 WHERE id = $1", e.data), id, v+delta, int64(h.Fence()))
	}
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (key, fence) VALUES ($1, $2)", e.log), h.Key(), int64(h.Fence()))
	return err
}

// row returns row id's v and fence; ok is false when it is missing.
func (e *env) row(t testing.TB, id int64) (v, fence int64, ok bool) {
	t.Helper()
	err := e.db.QueryRowContext(t.Context(), fmt.Sprintf("SELECT v, fence FROM %s WHERE id = $1", e.data), id).Scan(&v, &fence)
	if err == sql.ErrNoRows {
		return 0, 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, fence, true
}

// applied returns the fences of the applied writes of key, in commit
// order (the log's sequence is taken under the claim's row lock).
func (e *env) applied(t testing.TB, key string) []int64 {
	t.Helper()
	rows, err := e.db.QueryContext(t.Context(), fmt.Sprintf("SELECT fence FROM %s WHERE key = $1 ORDER BY seq", e.log), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var f int64
		if err := rows.Scan(&f); err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// mark returns the side table's high-water mark of key (0 when none).
func (e *env) mark(t testing.TB, key string) int64 {
	t.Helper()
	var f int64
	err := e.db.QueryRowContext(t.Context(), "SELECT fence FROM "+e.fences.Name()+" WHERE lock_key = $1", key).Scan(&f)
	if err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return f
}

// holder is a Holder with a fence chosen by the test.
type holder struct {
	key   string
	fence uint64
}

func (h holder) Key() string   { return h.key }
func (h holder) Fence() uint64 { return h.fence }
