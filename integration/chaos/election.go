package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/redlock"
)

// The workloads of Config.Workload other than single-key locks: leader
// election and multi-key locks (and those of tokens.go, which loopWorkload
// runs too). Their records are holds as a lock's are, so
// the checkers need nothing new: a leadership is a hold of the election's
// name from Campaign's return to the end of the leader's work (cut at its
// Until), with the term as its fence, so "one leader at a time" is mutual
// exclusion on the name and "terms grow" is the fence check; a multi-key
// lock is one hold per key, with one token.
const (
	workloadElection = "election"
	workloadMulti    = "multi"
)

// loopWorkload is loop for Config.Workload.
func (w *Workload) loopWorkload(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker) {
	for ctx.Err() == nil {
		switch w.cfg.Workload {
		case workloadElection:
			w.lead(ctx, i, rng, locker, w.keys[rng.IntN(len(w.keys))])
		case workloadMulti:
			w.holdMulti(ctx, i, rng, locker)
		case workloadSharedToken:
			w.shareToken(ctx, i, rng, locker, w.keys[rng.IntN(len(w.keys))])
		case workloadReacquire:
			w.reacquire(ctx, i, rng, locker, w.keys[rng.IntN(len(w.keys))])
		case workloadSemaphore, workloadSemaphoreAdmin:
			// Every client on one semaphore: three holders of two need
			// many contenders.
			w.holdShared(ctx, i, rng, locker, w.keys[0])
		case workloadRWLock, workloadRWLockAdmin:
			w.holdShared(ctx, i, rng, locker, w.keys[rng.IntN(len(w.keys))])
		default:
			w.rec.AddFailure("workload", fmt.Errorf("no workload %q", w.cfg.Workload), time.Now())
			return
		}
	}
}

// lead campaigns for name (for up to two TTLs), and while leading works for
// a while, as a leader does: it reads the protected counter, works until its
// work is done or its leadership context ends, and writes back only while
// leading with room left; then it resigns.
func (w *Workload) lead(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, name string) {
	cctx, cancel := context.WithTimeout(ctx, 2*w.cfg.TTL)
	ld, err := locker.Campaign(cctx, name)
	cancel()
	start := time.Now()
	if err != nil {
		if ctx.Err() == nil {
			w.rec.AddFailure("campaign", err, start)
			sleep(ctx, time.Millisecond+randDuration(rng, 10*time.Millisecond))
		}
		return
	}
	// A term is one leadership: its token for the checkers.
	token := fmt.Sprintf("leader-%d-%d", i, ld.Term())
	if w.write != nil {
		w.write(i, name, token, ld.Term())
	}
	leading := func() bool { return ld.Context().Err() == nil && time.Until(ld.Until()) > w.cfg.TTL/4 }
	d := randDuration(rng, w.cfg.MaxHold) + time.Millisecond
	if rng.IntN(4) == 0 {
		// A long term: it lives on extensions, through the faults.
		d = between(rng, w.cfg.TTL, 3*w.cfg.TTL)
	}
	work := func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ld.Context().Done():
		case <-ctx.Done():
		}
	}
	if w.fx != nil && leading() {
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		read := time.Now()
		v, err := w.fx.Read(octx, name, ld.Term(), w.cfg.CheckedEffects)
		if err == nil {
			work()
			if leading() {
				err = w.fx.Write(octx, name, ld.Term(), w.cfg.CheckedEffects, v, ld.Until(), writer(i, token, ld.Term(), w.cfg.CheckedEffects, read, ld.Until()))
			}
		}
		cancel()
		if err != nil {
			w.rec.AddFailure("effect", err, time.Now())
		}
	} else {
		work()
	}
	// The belief ends when the work stops, or at the leadership's
	// validity if that came first (a process stopped past it).
	end := time.Now()
	if u := ld.Until(); u.Before(end) {
		end = u
	}
	w.rec.AddHold(checker.Hold{Client: i, Key: name, Token: token, Fence: ld.Term(), Start: start, End: end})
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := ld.Resign(rctx); err != nil && !errors.Is(err, redlock.ErrLockNotHeld) {
		w.rec.AddFailure("resign", err, time.Now())
	}
}

// holdMulti takes two or more of the keys, in a random order, as one
// multi-key lock (one attempt for even clients, waiting for odd ones),
// holds them for a while doing a careful read-modify-write of each key's
// counter, and releases them.
func (w *Workload) holdMulti(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker) {
	perm := rng.Perm(len(w.keys))
	keys := make([]string, min(2+rng.IntN(max(len(w.keys)-1, 1)), len(w.keys)))
	for j := range keys {
		keys[j] = w.keys[perm[j]]
	}
	var (
		lock *redlock.Lock
		err  error
	)
	if i%2 == 0 {
		lock, err = locker.TryObtainMulti(ctx, keys)
	} else {
		octx, cancel := context.WithTimeout(ctx, 2*w.cfg.TTL)
		lock, err = locker.ObtainMulti(octx, keys)
		cancel()
	}
	start := time.Now()
	if err != nil {
		if ctx.Err() == nil {
			w.rec.AddFailure("obtain", err, start)
			sleep(ctx, time.Millisecond+randDuration(rng, 10*time.Millisecond))
		}
		return
	}
	room := func() bool { return time.Until(lock.Until()) > w.cfg.TTL/4 }
	d := randDuration(rng, w.cfg.MaxHold) + time.Millisecond
	if w.fx != nil && room() {
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		read := make([]int64, len(keys))
		readAt := time.Now()
		for j, k := range keys {
			if read[j], err = w.fx.Read(octx, k, 0, false); err != nil {
				break
			}
		}
		if err == nil {
			sleep(ctx, d)
			for j, k := range keys {
				if !room() {
					break
				}
				if err = w.fx.Write(octx, k, 0, false, read[j], lock.Until(), writer(i, lock.Token(), 0, false, readAt, lock.Until())); err != nil {
					break
				}
			}
		}
		cancel()
		if err != nil {
			w.rec.AddFailure("effect", err, time.Now())
		}
	} else {
		sleep(ctx, d)
	}
	end := time.Now()
	if u := lock.Until(); u.Before(end) {
		end = u
	}
	for _, k := range keys {
		w.rec.AddHold(checker.Hold{Client: i, Key: k, Token: lock.Token(), Start: start, End: end})
	}
	w.release(ctx, lock)
}
