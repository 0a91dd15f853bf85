package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/quorumlock/redlock/redlock/internal/notify"
)

// waiter is one acquisition between its attempts: it owns the wake-ups of
// its keys' releases (listen), its place in the Locker's line (join), the
// retry timer and the handoff offer (sleep), and decides after each failed
// attempt what comes next (afterFailure, behindHolder, in wait.go); close
// gives all of them up.
type waiter struct {
	a *acquisition
	// wake receives a value when a release of a key is announced, once
	// listen has registered.
	wake <-chan struct{}
	// queued is set once this call waits in the Locker's line for its
	// keys (see gates); a re-entry by token never queues, or it could wait
	// behind waiters for a lock it holds itself.
	queued bool
	// stops undoes listen and join, last first.
	stops []func()
	timer *time.Timer
	// seen is the line's count of locks let go (gates.freedCount) when
	// this turn of the retry loop began, read while in line; postOffer
	// compares it. A waiter that joins the line during a turn compares 0:
	// at worst its offer is refused and it tries again at once.
	seen uint64
}

func newWaiter(a *acquisition) *waiter {
	a.lateGrant = make(chan struct{}, 1)
	return &waiter{a: a, queued: a.cfg.tokenSet}
}

// close stops the timer and leaves the line, then stops listening: the turn
// goes to the next in line before the subscription may end.
func (w *waiter) close() {
	if w.timer != nil {
		w.timer.Stop()
	}
	for i := len(w.stops) - 1; i >= 0; i-- {
		w.stops[i]()
	}
}

// inLine reports whether this call waits in the Locker's line for its
// keys (a re-entry by token never does).
func (w *waiter) inLine() bool { return w.queued && !w.a.cfg.tokenSet }

// listen registers, once, for the keys' release notifications; it reports
// whether it registered now.
func (w *waiter) listen(ctx context.Context) bool {
	if w.wake != nil || w.a.cfg.pollingOnly {
		return false
	}
	wake, stop := w.a.l.notify.WaitAny(ctx, w.a.keys, w.a.cfg.nodeTimeout)
	w.wake = wake
	w.stops = append(w.stops, stop)
	return true
}

// join lines up behind the Locker's other waiters for the keys, listening
// first (the subscription then lasts as long as the line). A retry is due
// at once when others were ahead or we only now started listening: the
// release we wait for may have come already.
func (w *waiter) join(ctx context.Context) (retryNow bool, err error) {
	listening := w.listen(ctx)
	leave, waited, err := w.a.l.gates.enter(ctx, w.a.line)
	if err != nil {
		return false, err
	}
	w.stops = append(w.stops, leave)
	w.queued = true
	return waited || listening, nil
}

// lineUp joins the line at once when others of this Locker wait for the
// keys already (no barging). It fails when ctx ends in the line.
func (w *waiter) lineUp(ctx context.Context) error {
	if w.queued || !w.a.l.gates.busy(w.a.line) {
		return nil
	}
	if _, err := w.join(ctx); err != nil {
		return w.notNow()
	}
	return nil
}

// releaseSubscribers are the nodes' pipes, which the notifier subscribes
// with.
func releaseSubscribers(nodes []node) []notify.Node {
	out := make([]notify.Node, len(nodes))
	for i := range nodes {
		out[i] = nodes[i].pipe
	}
	return out
}

// drain drops stale wake-ups and late grants from before an attempt (each
// channel holds one: a stale one would swallow the real one).
func (w *waiter) drain() {
	for _, c := range [...]<-chan struct{}{w.wake, w.a.lateGrant} {
		select {
		case <-c:
		default:
		}
	}
}

// sleep waits for wait to pass, a release to be announced, a poke, a
// handoff, or ctx to end; err is the last round's error. It returns the lock
// a handoff gave us, or the error to give up with (err, with ctx's); or
// neither, when the caller should try again.
func (w *waiter) sleep(ctx context.Context, wait time.Duration, err error) (*Lock, error) {
	if w.timer == nil {
		w.timer = time.NewTimer(wait)
	} else {
		w.timer.Reset(wait)
	}
	// The head of the line, waiting for a holder, offers itself for a
	// handoff: a Release by this Locker may give it the lock directly (if
	// its kind has handoffs), or poke it to try at once.
	var o *offer
	if w.inLine() && errors.Is(err, ErrNotObtained) {
		o = newOffer(w.a)
		if beforeOffer != nil {
			beforeOffer(ctx)
		}
		if !w.a.l.gates.postOffer(w.a.line, o, w.seen) {
			// A lock got from the line was let go since we looked, and
			// its poke found no offer: try again at once.
			return nil, nil
		}
	}
	handed, got, end := w.await(ctx, o, wait)
	if o != nil && !got && !w.a.l.gates.withdraw(w.a.line, o) {
		// A Release claimed the offer: its round is under way.
		handed, got = <-o.done, true
	}
	if got {
		if ctx.Err() != nil {
			// A Release ran this round for us, perhaps only after ctx
			// ended (it claimed the offer before we could withdraw it):
			// an ended context obtains nothing, so it is undone. An
			// attempt of our own, by contrast, starts only with a live
			// ctx (see attempt).
			handed.res.OK = false
		}
		lock, herr := o.takeOver(ctx, handed)
		if herr == nil {
			return w.got(lock), nil
		}
		if errors.Is(herr, ErrClosed) {
			return nil, herr
		}
		// The handoff failed (nodes out of reach, say); the key may be
		// free now: try again at once.
	}
	if end || ctx.Err() != nil {
		return nil, err
	}
	return nil, nil
}

// await blocks until wait passes (as w.timer, set to it, says), a release
// is announced (w.wake), the offer o is poked or handed a result, or ctx
// ends; a grant that came after a split vote shortens the wait (see
// afterSplit). It returns the handoff's result with got set when o had
// one, and end set when ctx ended.
func (w *waiter) await(ctx context.Context, o *offer, wait time.Duration) (handed handoffResult, got, end bool) {
	until := time.Now().Add(wait)
	for {
		select {
		case <-ctx.Done():
			return handed, false, true
		case <-w.timer.C:
		case <-w.wake:
		case <-o.poked():
		case handed = <-o.outcome():
			return handed, true, false
		case <-w.a.lateGrant: // as after a split vote
			if d := w.afterSplit(); time.Until(until) > d {
				w.timer.Reset(d)
				until = time.Now().Add(d)
			}
			continue
		}
		return handed, false, false
	}
}

// exclusive reports whether a lock got from the waiter's line keeps the rest
// of the line waiting (heldHere): not a shared kind's (a permit, a lease),
// as others may be free.
func (w *waiter) exclusive() bool { return w.inLine() && !w.a.kind.manyHolders }

// heldHere reports for how much longer a lock that a goroutine of this
// Locker got from this line, and has not released, is valid.
func (w *waiter) heldHere() (time.Duration, bool) {
	if !w.exclusive() {
		return 0, false
	}
	return w.a.l.gates.heldFor(w.a.line, w.a.cfg.clock)
}

// got records in the line that this call got lock, and returns it.
func (w *waiter) got(lock *Lock) *Lock {
	if w.exclusive() {
		w.a.l.gates.markHeld(w.a.line, lock.Until())
	}
	return lock
}
