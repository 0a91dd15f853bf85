package fenced

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
)

// DefaultTable is the side table's name in Schema's migration.
const DefaultTable = "redlock_fences"

// Table is a side table of high-water marks, one row per lock key: the
// highest fence a transaction committed a claim with. Its statements are
// PostgreSQL's (ON CONFLICT, $n placeholders). A Table is safe for
// concurrent use.
type Table struct {
	name  string
	claim string
}

// identifier is an unquoted SQL name, optionally schema-qualified.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// NewTable returns the side table name ("schema.table" or "table",
// letters, digits and underscores, used unquoted); a bad name is an
// ErrInvalid.
func NewTable(name string) (*Table, error) {
	if !identifier.MatchString(name) {
		return nil, invalid("table name %q is not a plain SQL identifier", name)
	}
	// One statement checks and raises the mark. Under READ COMMITTED a
	// conflicting row is locked and its WHERE evaluated on the newest
	// committed version, so a claim that waited behind a newer holder's
	// commit changes no row; under REPEATABLE READ it fails with a
	// serialization error instead.
	claim := fmt.Sprintf(`INSERT INTO %[1]s (lock_key, fence) VALUES ($1, $2)
ON CONFLICT (lock_key) DO UPDATE SET fence = EXCLUDED.fence
WHERE %[1]s.fence <= EXCLUDED.fence`, name)
	return &Table{name: name, claim: claim}, nil
}

// Name returns the side table's name, as NewTable was given it.
func (t *Table) Name() string { return t.name }

// Schema returns the migration that creates the table, idempotent.
func (t *Table) Schema() string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
    lock_key TEXT PRIMARY KEY,
    fence    BIGINT NOT NULL CHECK (fence > 0)
);`, t.name)
}

// Claim raises the high-water mark of h's key to h's fence inside tx, and
// holds that row locked until tx ends, so every fenced transaction of the
// key commits in fence order. Claim first, then read and write: the
// writes commit only with the claim. It returns ErrStaleFence when a
// higher fence was committed (tx must then be rolled back: nothing of it
// may commit), ErrConflict joined with the driver's error on a
// serialization failure, and ErrInvalid for a lock without a fence.
func (t *Table) Claim(ctx context.Context, tx *sql.Tx, h Holder) error {
	fence, err := fenceOf(h)
	if err != nil {
		return err
	}
	if h.Key() == "" {
		return invalid("empty lock key")
	}
	res, err := tx.ExecContext(ctx, t.claim, h.Key(), fence)
	if err != nil {
		if serializationFailure(err) {
			return errors.Join(ErrConflict, err)
		}
		return fmt.Errorf("fenced: claim: %w", err)
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return fmt.Errorf("fenced: claim: %w", err)
	case n == 0:
		return ErrStaleFence
	}
	return nil
}

// Do runs fn in a transaction of db (opts as for sql.DB.BeginTx) that
// first claims h's fence, and commits it when fn returns nil. On any
// error (the claim's, fn's or the commit's), or a panic of fn, nothing is
// applied and the transaction is rolled back; the error is returned,
// ErrStaleFence and ErrConflict as Claim returns them. Do does not retry.
func (t *Table) Do(ctx context.Context, db *sql.DB, opts *sql.TxOptions, h Holder, fn func(tx *sql.Tx) error) (err error) {
	if _, err := fenceOf(h); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("fenced: begin: %w", err)
	}
	// Rolled back on every way out but a commit, a panic of fn
	// included: an open transaction would keep the key's mark locked.
	committed := false
	defer func() {
		if !committed {
			if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("fenced: rollback: %w", rerr))
			}
		}
	}()
	if err := t.Claim(ctx, tx, h); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		if serializationFailure(err) {
			return errors.Join(ErrConflict, err)
		}
		return fmt.Errorf("fenced: commit: %w", err)
	}
	return nil
}

// serializationFailure reports whether err carries SQLSTATE 40001, as the
// errors of pgx (pgconn.PgError) and lib/pq (pq.Error) do through a
// SQLState method.
func serializationFailure(err error) bool {
	var st interface{ SQLState() string }
	return errors.As(err, &st) && st.SQLState() == "40001"
}
