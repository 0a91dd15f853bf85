package chaos

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/redlock"
)

// The workloads of the primitives that let more than one client hold at
// once: a semaphore of semaphoreSize permits, and a read-write lock whose
// clients read two times in three. Each hold is recorded on the name, as a
// permit (Slots) or a reader's (Shared), for the checker: at most
// semaphoreSize permits at once, no reader beside a writer, writers' fences
// in order.
const (
	workloadSemaphore = "semaphore"
	workloadRWLock    = "rwlock"
	semaphoreSize     = 2
	// The admin variants: the same, and besides, a hold in four ends with
	// a ReleaseAfter cooldown (which keeps the permit's slot, or the lease,
	// for its length: a hold to the checker), and, for the semaphore, one
	// client in four uses a size one larger, which the nodes must refuse
	// (ErrInvalid) while a permit of the other size lives: the checker
	// holds every permit to the smallest size among those held with it.
	workloadSemaphoreAdmin = "semaphore-admin"
	workloadRWLockAdmin    = "rwlock-admin"
)

// semaphoreWorkload reports whether workload takes a semaphore's permits.
func semaphoreWorkload(workload string) bool {
	return workload == workloadSemaphore || workload == workloadSemaphoreAdmin
}

// adminWorkload reports whether workload is an admin variant.
func adminWorkload(workload string) bool {
	return workload == workloadSemaphoreAdmin || workload == workloadRWLockAdmin
}

// holdShared is one round of the semaphore or read-write workload for
// client i on name: it takes a permit, or a reader's or the writer's
// lease (half the clients once, half waiting up to two TTLs), holds it for
// a while, extending it once one time in four (or pauses in it, when the
// nemesis asks), and releases it.
func (w *Workload) holdShared(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, name string) {
	var opts []redlock.LockOption
	if w.cfg.Fencing {
		opts = append(opts, redlock.WithFencing())
	}
	var try, wait func(context.Context, ...redlock.LockOption) (*redlock.Lock, error)
	seg := checker.Hold{Client: i, Key: name}
	switch {
	case semaphoreWorkload(w.cfg.Workload):
		size := semaphoreSize
		if adminWorkload(w.cfg.Workload) && i%4 == 3 {
			size++
		}
		s := locker.Semaphore(name, size)
		try, wait = s.TryObtain, s.Obtain
		seg.Slots, seg.FenceHidden = size, true
	case rng.IntN(3) > 0:
		m := locker.RWMutex(name)
		try, wait = m.TryRLock, m.RLock
		seg.Shared = true
	default:
		m := locker.RWMutex(name)
		try, wait = m.TryLock, m.Lock
	}
	var (
		lock *redlock.Lock
		err  error
	)
	if i%2 == 0 {
		lock, err = try(ctx, opts...)
	} else {
		octx, cancel := context.WithTimeout(ctx, 2*w.cfg.TTL)
		lock, err = wait(octx, opts...)
		cancel()
	}
	seg.Start = time.Now()
	if err != nil {
		if ctx.Err() == nil {
			w.rec.AddFailure("obtain", err, seg.Start)
			sleep(ctx, time.Millisecond+randDuration(rng, 10*time.Millisecond))
		}
		return
	}
	seg.Token, seg.Fence, seg.End = lock.Token(), lock.Fence(), lock.Until()
	d := randDuration(rng, w.cfg.MaxHold) + time.Millisecond
	extend := !seg.Empty() && rng.IntN(4) == 0
	hold := func() { w.holdFor(ctx, lock, &seg, d, extend) }
	if st := w.nextStall(i); st.done != nil {
		// The client pause (client-pause): the holder stops for longer
		// than the TTL. Its belief ended at Until; a writer's careful
		// write then finds no room left and is not made.
		hold = st.pause
	}
	if seg.Shared || seg.Slots > 0 {
		hold()
	} else {
		// A writer is the one holder: its read-modify-writes of the
		// name's counter lose no update, as a mutex holder's.
		w.carefulEffect(ctx, i, lock, hold)
	}
	if now := time.Now(); now.Before(seg.End) {
		seg.End = now
	}
	w.rec.AddHold(seg)
	if adminWorkload(w.cfg.Workload) && rng.IntN(4) == 0 {
		w.releaseAfter(ctx, lock, seg, randDuration(rng, w.cfg.TTL)+time.Millisecond)
		return
	}
	w.release(ctx, lock)
}

// holdFor holds lock, whose hold seg records, for d, extending it halfway
// if extend is set.
func (w *Workload) holdFor(ctx context.Context, lock *redlock.Lock, seg *checker.Hold, d time.Duration, extend bool) {
	if extend {
		sleep(ctx, d/2)
		err := lock.Extend(ctx, w.cfg.TTL)
		now := time.Now()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				w.rec.AddFailure("extend", err, now)
			}
		case now.After(seg.End):
			// Extended after its deadline had passed: a new belief.
			w.rec.AddHold(*seg)
			seg.Segment++
			seg.Start = now
			seg.End = lock.Until()
		default:
			seg.End = lock.Until()
		}
		sleep(ctx, d/2)
	} else if !seg.Empty() {
		sleep(ctx, d)
	}
}
