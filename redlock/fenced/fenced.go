package fenced

import (
	"errors"
	"fmt"
	"math"
)

// Holder is what a fenced write needs of a lock: the lock key, which names
// the high-water mark in SQL, and the fence. *redlock.Lock is a Holder.
type Holder interface {
	Key() string
	Fence() uint64
}

var (
	// ErrStaleFence is returned when the resource has accepted a higher
	// fence than the writer's: a newer holder wrote first, and this write
	// was not applied.
	ErrStaleFence = errors.New("fenced: stale fence, a newer holder wrote first")
	// ErrConflict is returned when the database refused a claim with a
	// serialization failure (REPEATABLE READ or SERIALIZABLE, while another
	// transaction claimed the same key): nothing was applied, and the
	// whole transaction may be retried.
	ErrConflict = errors.New("fenced: concurrent claim of the same key, retry the transaction")
	// ErrInvalid is returned for a write that cannot be fenced: a lock
	// without a fence (not obtained WithFencing), an empty key, a bad table
	// name, or a Redis value that holds no fence.
	ErrInvalid = errors.New("fenced: invalid")
)

// invalid returns an ErrInvalid with a one-line reason.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// fenceOf returns h's fence, or an ErrInvalid when h has none or it does
// not fit a signed 64-bit column.
func fenceOf(h Holder) (int64, error) {
	if h == nil {
		return 0, invalid("no lock")
	}
	f := h.Fence()
	switch {
	case f == 0:
		return 0, invalid("the lock has no fence (obtain it WithFencing)")
	case f > math.MaxInt64:
		return 0, invalid("fence %d does not fit a signed 64-bit integer", f)
	}
	return int64(f), nil
}
