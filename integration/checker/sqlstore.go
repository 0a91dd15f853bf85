package checker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/quorumlock/redlock/redlock/fenced"
)

// Effector is a protected resource that judges effects: Store, in Redis,
// or SQLStore, in PostgreSQL through the fenced package.
type Effector interface {
	Read(ctx context.Context, key string, fence uint64, checked bool) (int64, error)
	Write(ctx context.Context, key string, fence uint64, checked bool, read int64, deadline time.Time, who string) error
	Effects(ctx context.Context) (Effects, error)
	Close() error
}

var (
	_ Effector = (*Store)(nil)
	_ Effector = (*SQLStore)(nil)
)

// SQLStore is the effects checker with its protected counters in a
// PostgreSQL database, fenced as a user of the library would fence them:
// a checked operation is a transaction that claims its fence with
// fenced.Table first (ErrStale when a higher one was claimed), then reads
// or writes. It judges as Store does: a write that overwrites a value
// other than the one its writer read has lost an update. Unchecked
// operations claim nothing. Its methods are safe for concurrent use, also
// from several processes on one database.
type SQLStore struct {
	db     *sql.DB
	fences *fenced.Table
	iso    sql.IsolationLevel
}

// sqlSchema creates the store's tables; the fences' table is
// fenced.Table's own migration.
const sqlSchema = `
CREATE TABLE IF NOT EXISTS fx_values (key TEXT PRIMARY KEY, v BIGINT NOT NULL, who TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fx_counts (name TEXT PRIMARY KEY, n BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS fx_lost (seq BIGSERIAL PRIMARY KEY, line TEXT NOT NULL);`

// NewSQLStore returns a SQLStore over the PostgreSQL database at url,
// running its transactions at isolation level iso (READ COMMITTED or
// REPEATABLE READ; a serialization failure is retried). Migrate creates
// its tables; Close closes its connections.
func NewSQLStore(url string, iso sql.IsolationLevel) (*SQLStore, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, err
	}
	fences, err := fenced.NewTable("fx_fences")
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &SQLStore{db: db, fences: fences, iso: iso}, nil
}

// Migrate creates the store's tables.
func (s *SQLStore) Migrate(ctx context.Context) error {
	for _, q := range []string{s.fences.Schema(), sqlSchema} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("effects store: migrating: %w", err)
		}
	}
	return nil
}

// Close closes the store's connections.
func (s *SQLStore) Close() error { return s.db.Close() }

// fenceHolder is a fenced.Holder of a key and a fence.
type fenceHolder struct {
	key   string
	fence uint64
}

func (h fenceHolder) Key() string   { return h.key }
func (h fenceHolder) Fence() uint64 { return h.fence }

// retries bounds the attempts of an operation that meets serialization
// failures (REPEATABLE READ, while other holders claim the same key).
const retries = 100

// inTx runs fn in a transaction at the store's isolation level that first
// claims fence for key when checked, and commits when fn returns nil. A
// stale claim is ErrStale; a serialization failure runs it all again.
func (s *SQLStore) inTx(ctx context.Context, key string, fence uint64, checked bool, fn func(tx *sql.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := s.tx(ctx, key, fence, checked, fn)
		if (errors.Is(err, fenced.ErrConflict) || serializationFailure(err)) && attempt < retries {
			continue
		}
		if errors.Is(err, fenced.ErrStaleFence) {
			return ErrStale
		}
		return err
	}
}

func (s *SQLStore) tx(ctx context.Context, key string, fence uint64, checked bool, fn func(tx *sql.Tx) error) error {
	opts := &sql.TxOptions{Isolation: s.iso}
	if checked {
		return s.fences.Do(ctx, s.db, opts, fenceHolder{key, fence}, fn)
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// serializationFailure reports whether err carries SQLSTATE 40001: a
// statement after the claim (or without one) met a concurrent update
// under REPEATABLE READ.
func serializationFailure(err error) bool {
	var st interface{ SQLState() string }
	return errors.As(err, &st) && st.SQLState() == "40001"
}

// bump adds one to the count name.
func (s *SQLStore) bump(ctx context.Context, name string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO fx_counts (name, n) VALUES ($1, 1)
ON CONFLICT (name) DO UPDATE SET n = fx_counts.n + 1`, name)
	return err
}

// Read reads key's counter for the holder of a lock with fence. A checked
// read claims the fence first, and fails with ErrStale when a higher one
// was claimed.
func (s *SQLStore) Read(ctx context.Context, key string, fence uint64, checked bool) (int64, error) {
	var v int64
	err := s.inTx(ctx, key, fence, checked, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT v FROM fx_values WHERE key = $1`, key).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			v, err = 0, nil
		}
		return err
	})
	if errors.Is(err, ErrStale) {
		return 0, errors.Join(err, s.bump(ctx, "stale-reads"))
	}
	return v, err
}

// Write sets key's counter to read+1, as Store.Write does: a checked
// write claims its fence first (ErrStale, nothing written, when a higher
// one was claimed); a write that finds another value than read has lost
// an update, counted apart when it landed after deadline unchecked.
func (s *SQLStore) Write(ctx context.Context, key string, fence uint64, checked bool, read int64, deadline time.Time, who string) error {
	var cur int64
	var last string
	var late bool
	err := s.inTx(ctx, key, fence, checked, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO fx_values (key, v, who) VALUES ($1, 0, 'nobody') ON CONFLICT (key) DO NOTHING`, key); err != nil {
			return err
		}
		var now time.Time
		err := tx.QueryRowContext(ctx, `SELECT v, who, clock_timestamp() FROM fx_values WHERE key = $1 FOR UPDATE`, key).Scan(&cur, &last, &now)
		if err != nil {
			return err
		}
		late = !deadline.IsZero() && now.After(deadline)
		_, err = tx.ExecContext(ctx, `UPDATE fx_values SET v = $2, who = $3 WHERE key = $1`, key, read+1, who)
		return err
	})
	switch {
	case errors.Is(err, ErrStale):
		return errors.Join(err, s.bump(ctx, "stale-writes"))
	case err != nil:
		return err
	}
	// The verdict was made in the transaction; the counts are the
	// checker's, not the resource's, and follow it.
	counts := []string{"writes"}
	if late {
		counts = append(counts, "late")
	}
	if cur != read {
		what := "LOST UPDATE"
		if late && !checked {
			counts, what = append(counts, "lost-late"), "LOST BY A LATE WRITER"
		} else {
			counts = append(counts, "lost")
		}
		line := fmt.Sprintf("%s: %s: %s read %d but overwrote %d (the overwritten write: %s)", what, key, who, read, cur, last)
		if _, err := s.db.ExecContext(ctx, `INSERT INTO fx_lost (line) SELECT $1 WHERE (SELECT count(*) FROM fx_lost) < 20`, line); err != nil {
			return err
		}
	}
	for _, c := range counts {
		if err := s.bump(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// Effects reads the store's counts.
func (s *SQLStore) Effects(ctx context.Context) (Effects, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, n FROM fx_counts`)
	if err != nil {
		return Effects{}, fmt.Errorf("reading the effects store: %w", err)
	}
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var name string
		var v int
		if err := rows.Scan(&name, &v); err != nil {
			return Effects{}, err
		}
		n[name] = v
	}
	if err := rows.Err(); err != nil {
		return Effects{}, err
	}
	e := Effects{Checked: true, Writes: n["writes"], LostUpdates: n["lost"], StaleWrites: n["stale-writes"], StaleReads: n["stale-reads"],
		LateLost: n["lost-late"], LateWrites: n["late"]}
	lines, err := s.db.QueryContext(ctx, `SELECT line FROM fx_lost ORDER BY seq`)
	if err != nil {
		return Effects{}, err
	}
	defer lines.Close()
	for lines.Next() {
		var l string
		if err := lines.Scan(&l); err != nil {
			return Effects{}, err
		}
		e.Lost = append(e.Lost, l)
	}
	return e, lines.Err()
}
