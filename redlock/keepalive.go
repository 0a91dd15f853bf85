package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/clock"
)

// lostError is the cause of a KeepAlive context when the lock is lost: it
// matches ErrLockLost, and also the reason the servers gave.
type lostError struct{ reason error }

func (e *lostError) Error() string {
	switch {
	case e.reason == nil:
		return "redlock: lock lost"
	case e.reason == ErrLockExpired:
		return "redlock: lock lost: no extension reached a majority in time (its validity ends within the node timeout and margin)"
	case e.reason == errNoTimeLeft:
		return "redlock: lock lost: too little of its validity was left to keep it (within the node timeout and margin) when KeepAlive began"
	}
	// The reason's own "redlock: lock not held: " would say it twice.
	return "redlock: lock lost: " + strings.TrimPrefix(strings.TrimPrefix(e.reason.Error(), "redlock: "), "lock not held: ")
}

func (e *lostError) Unwrap() []error {
	switch e.reason {
	case nil:
		return []error{ErrLockLost}
	case errNoTimeLeft:
		return []error{ErrLockLost, ErrLockExpired}
	}
	return []error{ErrLockLost, e.reason}
}

// errNoTimeLeft is the reason of a loss found as KeepAlive began: the
// acquisition left less validity than the warning lead, or the holder was
// held up since.
var errNoTimeLeft = errors.New("no time left")

// minWarnMargin is the least margin of the warning lead (see warnLead).
const minWarnMargin = 5 * time.Millisecond

// warnLead is how long before Until KeepAlive gives up on extending and
// tells the work: the node timeout, because an extension still in flight then
// cannot be counted on to finish before Until, plus a margin of a twentieth
// of the TTL (at least minWarnMargin), so that the work hears of it, and can
// stop, while no one else can hold the lock yet, even with timers running
// late on a loaded machine.
func (c *config) warnLead() time.Duration {
	return c.nodeTimeout + max(c.ttl/20, minWarnMargin)
}

// checkKeepAlive rejects a TTL too short for one extension (which may take
// the node timeout) to finish before the warning, even after an instant
// acquisition: such a lock would be kept by luck only, and lost at the first
// slow round.
func (c *config) checkKeepAlive() error {
	drift := clock.Drift(c.ttl, c.driftFactor)
	if room := c.ttl - drift - c.warnLead() - c.nodeTimeout; room <= 0 {
		return invalid("TTL %v leaves no time to extend the lock before its holder must be warned: it must exceed twice the node timeout %v plus the margin %v and the drift %v",
			c.ttl, c.nodeTimeout, c.warnLead()-c.nodeTimeout, drift)
	}
	return nil
}

// KeepAlive extends the lock in the background until stop is called or ctx
// ends, and returns a context derived from ctx that is cancelled, with a
// cause matching ErrLockLost, as soon as the lock is lost: the nodes say it
// is not ours, or no extension reached a majority by the node timeout plus
// TTL/20 before Until; that is when the cancellation is scheduled, so it
// comes at least a node timeout before Until while the process's timers are
// late by less than TTL/20 (docs/safety.md#the-work-is-told-before-the-lock-runs-out).
// The context is cancelled already, and nothing kept, when the validity is
// too short for that warning (ErrLockExpired too), the TTL leaves no room
// to extend (ErrInvalid), the lock is released (ErrReleased) or the Locker
// closed (ErrClosed). stop ends the extension and waits for its round in
// flight, without releasing; it may be called more than once.
func (k *Lock) KeepAlive(ctx context.Context) (held context.Context, stop context.CancelFunc) {
	held, cancel := context.WithCancelCause(ctx)
	if err := k.cfg.checkKeepAlive(); err != nil {
		cancel(err)
		return held, func() { cancel(err) }
	}
	e := &k.locker.ext
	kp := e.add(k, held, cancel)
	var once sync.Once
	return held, func() {
		once.Do(func() {
			e.stop(kp)
			cancel(context.Canceled)
		})
	}
}

// Do obtains the lock on key as Obtain does, runs fn with a context derived
// from ctx while KeepAlive keeps the lock, and releases it when fn returns
// or panics (the panic goes on). It returns Obtain's error (fn does not
// run), ErrInvalid for a TTL too short to extend, an error matching
// ErrLockLost joined with fn's when the lock is lost (fn's context is
// cancelled first; lost before fn starts, fn never runs), or else fn's
// error joined with Release's.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...LockOption) (err error) {
	if fn == nil {
		return invalid("nil fn")
	}
	cfg, err := l.callConfig(key, opts)
	if err != nil {
		return err
	}
	if err := cfg.checkKeepAlive(); err != nil {
		return err
	}
	lock, err := l.Obtain(ctx, key, opts...)
	if err != nil {
		return err
	}
	held, stop := lock.KeepAlive(ctx)
	// Deferred, so that it runs when fn panics (or calls runtime.Goexit)
	// as well: the extension stops and the lock is released, and the
	// panic then goes on unchanged.
	defer func() {
		stop()
		// Read after stop: a loss signalled until then counts.
		lost := context.Cause(held)
		rerr := lock.Release(context.WithoutCancel(ctx))
		if errors.Is(lost, ErrLockLost) {
			err = errors.Join(err, lost)
			return
		}
		err = errors.Join(err, rerr)
	}()
	// A lock lost before the work could start (too little validity was
	// left: the acquisition took nearly the TTL, or this goroutine was held
	// up since), or a ctx that ended meanwhile: fn would start unprotected,
	// with its context cancelled already. It does not run.
	if cause := context.Cause(held); cause != nil {
		if errors.Is(cause, ErrLockLost) {
			return nil // the deferred release reports the loss
		}
		return cause
	}
	return fn(held)
}
