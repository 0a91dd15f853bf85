package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/redlock"
)

// The behaviours of Config.Behaviours: the ways real programs use the lock,
// each recorded so that the checkers hold the library to what it promised
// the program.
const (
	behavePlain = iota
	behaveReenter
	behaveExtendRaceRelease
	behaveDoPanic
	behaveDoIgnoringContext
	behaveKeepAlive
	behaveReleaseAfter
	behaveHandoff
	behaviours
)

// behave takes key once in one of the behaviours, drawn at random.
func (w *Workload) behave(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, key string) {
	switch rng.IntN(behaviours) {
	case behaveDoPanic:
		w.doPanic(ctx, i, rng, locker, key)
		return
	case behaveDoIgnoringContext:
		w.doIgnoringContext(ctx, i, rng, locker, key)
		return
	}
	lock, obtained, ok := w.obtain(ctx, i, rng, locker, key)
	if !ok {
		return
	}
	switch rng.IntN(behaviours) {
	case behaveReenter:
		w.reenter(ctx, i, rng, locker, lock)
		w.hold(ctx, i, rng, lock, obtained, 0)
	case behaveExtendRaceRelease:
		w.extendRaceRelease(ctx, i, rng, lock, obtained)
	case behaveKeepAlive:
		w.keepAlive(ctx, i, rng, lock, obtained)
	case behaveReleaseAfter:
		w.hold(ctx, i, rng, lock, obtained, between(rng, w.cfg.TTL/4, w.cfg.TTL))
	case behaveHandoff:
		// The goroutine that obtained the lock hands it to a worker,
		// which uses and releases it.
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.hold(ctx, i, rng, lock, obtained, 0)
		}()
		<-done
	default:
		w.hold(ctx, i, rng, lock, obtained, 0)
	}
}

// token returns a fresh owner token for a call whose lock the client
// cannot see (Do), so that it can still be recognised on the nodes.
func token(i int, rng *rand.Rand) string { return fmt.Sprintf("chaos-%d-%016x", i, rng.Uint64()) }

// reenter takes the held lock again with its token and another TTL, shorter
// or longer, holds it briefly and releases that hold. The outer holder keeps
// believing its own deadline: nothing may shorten it.
func (w *Workload) reenter(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, outer *redlock.Lock) {
	ttls := []time.Duration{w.cfg.TTL / 4, w.cfg.TTL / 2, 2 * w.cfg.TTL}
	inner, err := locker.TryObtain(ctx, outer.Key(), redlock.WithToken(outer.Token()), redlock.WithTTL(ttls[rng.IntN(len(ttls))]))
	at := time.Now()
	if err != nil {
		if ctx.Err() == nil {
			w.rec.AddFailure("reenter", err, at)
		}
		return
	}
	sleep(ctx, randDuration(rng, w.cfg.MaxHold/2)+time.Millisecond)
	end := time.Now()
	if u := inner.Until(); u.Before(end) {
		end = u
	}
	// A segment of the same token: it shows the inner hold's belief, and
	// counts as no new acquisition.
	w.rec.AddHold(checker.Hold{Client: i, Key: outer.Key(), Token: outer.Token(), Fence: inner.Fence(), Segment: 1, Start: at, End: end})
	w.release(ctx, inner)
}

// extendRaceRelease extends the lock in one goroutine while another
// releases it. Afterwards the handle is not valid, and a successful Release
// left nothing of ours on the servers.
func (w *Workload) extendRaceRelease(ctx context.Context, i int, rng *rand.Rand, lock *redlock.Lock, obtained time.Time) {
	sleep(ctx, randDuration(rng, w.cfg.MaxHold)+time.Millisecond)
	seg := checker.Hold{Client: i, Key: lock.Key(), Token: lock.Token(), Fence: lock.Fence(), Start: obtained, End: lock.Until()}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := lock.Extend(ctx, w.cfg.TTL); err != nil && ctx.Err() == nil && !errors.Is(err, redlock.ErrLockNotHeld) {
			w.rec.AddFailure("extend", err, time.Now())
		}
	})
	// The belief ends when Release is called, whatever Extend does.
	if now := time.Now(); now.Before(seg.End) {
		seg.End = now
	}
	w.rec.AddHold(seg)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	rerr := lock.Release(rctx)
	wg.Wait()
	if rerr != nil {
		w.rec.AddFailure("release", rerr, time.Now())
	}
	if lock.Valid() {
		w.rec.AddAnomaly(checker.Anomaly{Kind: "valid-after-release", Client: i, Key: lock.Key(), At: time.Now(),
			Detail: "the handle is still Valid after Release returned (Extend raced it)"})
	}
	if rerr == nil {
		if _, err := lock.TTL(rctx); err == nil {
			w.rec.AddAnomaly(checker.Anomaly{Kind: "held-after-release", Client: i, Key: lock.Key(), At: time.Now(),
				Detail: "a majority still holds our token after Release succeeded (Extend raced it)"})
		}
	}
}

// keepAlive holds the lock for one to three TTLs with KeepAlive, trusting
// the context it returns: the belief lasts until that context is cancelled,
// as a program that watches it believes.
func (w *Workload) keepAlive(ctx context.Context, i int, rng *rand.Rand, lock *redlock.Lock, obtained time.Time) {
	held, stop := lock.KeepAlive(ctx)
	var lostAt atomic.Int64
	unwatch := context.AfterFunc(held, func() { lostAt.Store(time.Now().UnixNano()) })
	d := between(rng, w.cfg.TTL, 3*w.cfg.TTL)
	w.carefulEffect(ctx, i, lock, func() { sleep(held, d) })
	stop()
	unwatch()
	end := time.Now()
	if t := lostAt.Load(); t != 0 && time.Unix(0, t).Before(end) {
		end = time.Unix(0, t)
	}
	// A client stopped past its deadline learns of the loss only when it
	// runs again: as for every hold, its belief ends at the deadline.
	if u := lock.Until(); u.Before(end) {
		end = u
	}
	w.rec.AddHold(checker.Hold{Client: i, Key: lock.Key(), Token: lock.Token(), Fence: lock.Fence(), Start: obtained, End: end})
	w.release(ctx, lock)
}

// doRecord runs fn under Do with a known token and records the belief: from
// fn's start until fn's context was cancelled or fn returned.
func (w *Workload) doRecord(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, key string, fn func(context.Context)) (tok string, err error) {
	tok = token(i, rng)
	var start, returned time.Time
	var cancelledAt atomic.Int64
	defer func() {
		if start.IsZero() {
			return
		}
		// The belief ends when fn returns (or panics), not when Do does:
		// Do releases the lock after fn, and the next holder may have it
		// before Do returns.
		end := returned
		if t := cancelledAt.Load(); t != 0 && time.Unix(0, t).Before(end) {
			end = time.Unix(0, t)
		}
		w.rec.AddHold(checker.Hold{Client: i, Key: key, Token: tok, FenceHidden: true, Start: start, End: end})
	}()
	octx, cancel := context.WithTimeout(ctx, 2*w.cfg.TTL)
	defer cancel()
	err = locker.Do(octx, key, func(fctx context.Context) error {
		start = time.Now()
		stop := context.AfterFunc(fctx, func() { cancelledAt.Store(time.Now().UnixNano()) })
		defer stop()
		defer func() { returned = time.Now() }() // a panic too
		fn(fctx)
		return nil
	}, redlock.WithToken(tok))
	return tok, err
}

// doPanic runs work under Do that panics. The panic reaches the caller,
// and the lock must be released: nothing of our token is left on a
// majority.
func (w *Workload) doPanic(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, key string) {
	var tok string
	panicked := false
	func() {
		defer func() {
			if recover() != nil {
				panicked = true
			}
		}()
		var err error
		tok, err = w.doRecord(ctx, i, rng, locker, key, func(context.Context) {
			sleep(ctx, randDuration(rng, w.cfg.MaxHold)+time.Millisecond)
			panic("chaos: the work panics")
		})
		if err != nil && ctx.Err() == nil {
			w.rec.AddFailure("do", err, time.Now())
		}
	}()
	if !panicked {
		return
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	st, err := locker.Inspect(ictx, key)
	if err != nil {
		return // an outage: nothing to tell
	}
	n := 0
	for _, node := range st.Nodes {
		if node.Held && node.Token == tok {
			n++
		}
	}
	if n >= locker.Quorum() {
		w.rec.AddAnomaly(checker.Anomaly{Kind: "held-after-panic", Client: i, Key: key, At: time.Now(),
			Detail: fmt.Sprintf("%d nodes still hold the lock after its work panicked in Do", n)})
	}
}

// doIgnoringContext runs work under Do that ignores its context and goes
// on for up to two TTLs (Do extends the lock meanwhile). The program's
// belief still ends when its context is cancelled: the library must cancel
// it before the validity ends.
func (w *Workload) doIgnoringContext(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, key string) {
	d := between(rng, w.cfg.TTL/2, 2*w.cfg.TTL)
	_, err := w.doRecord(ctx, i, rng, locker, key, func(context.Context) {
		time.Sleep(d) // ignores its context on purpose
	})
	if err != nil && ctx.Err() == nil {
		w.rec.AddFailure("do", err, time.Now())
	}
}

// releaseAfter releases with a cooldown and records it as a segment of the
// same token: nobody else may hold the key until the cooldown, less the
// drift, has passed since the call.
func (w *Workload) releaseAfter(ctx context.Context, lock *redlock.Lock, seg checker.Hold, cooldown time.Duration) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	called := time.Now()
	if err := lock.ReleaseAfter(rctx, cooldown); err != nil {
		w.rec.AddFailure("release", err, time.Now())
		return
	}
	if lock.Token() == sharedToken(lock.Key()) {
		// A cooldown of one hold among others of the same token (the
		// shared-token workload): whether it keeps the key past the
		// others' releases is the library's to say, so only the holds
		// themselves are checked.
		return
	}
	drift := time.Duration(float64(cooldown)*redlock.DefaultDriftFactor) + 2*time.Millisecond
	seg.Segment++
	seg.Start, seg.End = time.Now(), called.Add(cooldown-drift)
	if !seg.Empty() {
		w.rec.AddHold(seg)
	}
}
