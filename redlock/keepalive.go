package redlock

import (
	"context"
	"errors"
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
	return "redlock: lock lost: " + e.reason.Error()
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
// cause matching ErrLockLost (context.Cause), as soon as the lock is lost:
// an extension found it not ours, or no extension reached a majority in
// time.
//
// The work is told at the latest the node timeout plus a margin (a
// twentieth of the TTL, at least 5 ms) before Until, whatever an
// extension in flight is doing: the deadline is watched beside the
// extension, not after it, and moves with Until on every successful
// extension. Loss is final: the lock is then no longer Valid, even if an
// extension still in flight succeeds afterwards.
//
// It extends when about a third of the TTL has passed since the last
// extension (or the acquisition), up to a thirty-second of the TTL earlier
// to share a round with other locks of the Locker: one goroutine of the
// Locker keeps every lock given to KeepAlive, and extends the single-key
// locks that share their options in common rounds, one script call per
// node for up to 128 keys. After a failed extension (an outage: overloaded,
// slow or dead nodes) it tries again every twenty-fourth of the TTL or a
// little sooner, the last attempt no later than one node timeout before
// the warning, so that retries fit within the validity. Only the nodes
// saying the lock is not ours, or the warning, end it. Multi-key locks are
// extended one by one. An Observer sees each lock's extension in a common
// round as an Extend of its own, in the context of the work.
//
// When the warning is due already as KeepAlive begins (the acquisition took
// nearly the TTL, or the holder was held up since), the returned context is
// cancelled already, with a cause matching ErrLockLost and ErrLockExpired:
// do not start the work.
//
// When the lock's TTL leaves no room for one extension before that warning
// (it must exceed twice the node timeout, the margin and the drift), the
// returned context is already cancelled with a cause matching ErrInvalid,
// not ErrLockLost, and nothing runs in the background; the lock is left as
// it was.
//
// Release ends the returned context as it begins, with cause ErrReleased
// (not ErrLockLost: the owner let go); the Locker's Close as it begins,
// with a cause matching ErrLockLost and ErrClosed (nothing extends the
// lock any more). KeepAlive on a released lock, or after Close, returns a
// context ended already with that cause, and keeps nothing.
//
// stop ends the lock's extension and waits for its round in flight (for
// at most about a node timeout); it does not release the lock. It is safe
// to call more than once.
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

// Do obtains the lock on key (waiting as Obtain does), runs fn, keeps the
// lock extended while fn runs (see KeepAlive), and releases it when fn
// returns.
//
// ctx bounds the work as well as the wait: fn's context derives from it,
// so a deadline meant for the wait alone also ends fn (give Do a context
// without that deadline, and bound the wait with WithRetry, to let the
// work run longer).
//
// If the lock is lost while fn runs, fn's context is cancelled with a cause
// matching ErrLockLost (context.Cause), at the latest the node timeout plus
// a margin (a twentieth of the TTL, at least 5 ms) before Until, whatever an
// extension in flight is doing; Do then returns an error matching
// ErrLockLost (joined with fn's own error, if any). Otherwise Do returns
// fn's error joined with any error from Release. When the lock cannot be
// obtained, fn does not run and Do returns Obtain's error. When the lock
// is lost before fn could start (less of its validity was left than that
// warning needs: the acquisition took nearly the TTL, or the goroutine was
// held up), or ctx ends meanwhile, fn does not run either: Do releases the
// lock and returns an error matching ErrLockLost, or ctx's cause. When the TTL
// leaves no room to extend the lock before that warning (it must exceed
// twice the node timeout, the margin and the drift), fn does not run and
// Do returns an error matching ErrInvalid without asking any node.
//
// If fn panics, Do stops the extension and releases the lock, then lets the
// panic go on with its own value. The background extension always ends
// before Do returns.
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
