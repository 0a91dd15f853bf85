package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// The workloads that use one token for more than one acquisition: clients
// that share a token (as processes of one job do, to re-enter each other's
// lock), and a client that obtains a key again with its token right after
// releasing it.
const (
	workloadSharedToken = "shared-token"
	workloadReacquire   = "reacquire"
)

// sharedToken is the token the sharing clients of the shared-token
// workload use on key.
func sharedToken(key string) string { return "chaos-shared-" + key }

// thirdParty reports whether client i of the shared-token workload is a
// third party, with tokens of its own, rather than one of the sharers.
func thirdParty(i int) bool { return i%3 == 2 }

// shareToken is one round of the shared-token workload for client i: a
// sharer obtains key with the key's shared token (WithToken), holds it for
// a while and releases it, with a cooldown (ReleaseAfter) one time in
// five, then pauses; a third party obtains and holds it with a token of
// its own. The holds are recorded with their tokens, so the checker takes
// sharers' holds for one lock and a third party's overlapping any of them
// for a violation.
func (w *Workload) shareToken(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, key string) {
	var opts []redlock.LockOption
	if !thirdParty(i) {
		opts = append(opts, redlock.WithToken(sharedToken(key)))
	}
	lock, obtained, ok := w.obtain(ctx, i, rng, locker, key, opts...)
	if !ok {
		return
	}
	var cooldown time.Duration
	if !thirdParty(i) && rng.IntN(5) == 0 {
		cooldown = between(rng, w.cfg.TTL/4, w.cfg.TTL/2)
	}
	w.hold(ctx, i, rng, lock, obtained, cooldown)
	if !thirdParty(i) {
		// Sharers leave the key alone for a while between rounds: there
		// are many of them, and without a pause they would keep it held
		// for good, shutting the third parties out.
		sleep(ctx, randDuration(rng, 4*w.cfg.MaxHold))
	}
}

// reacquire is one round of the reacquire workload for client i: with a
// token of its own it obtains key, holds it, releases it and at once
// obtains it again with the same token, two to nine times, until an
// attempt fails. Each acquisition is recorded apart (token/n), so the
// fence check sees every one of them as a holder of its own, whose fence
// must be above the previous holder's, whoever that was.
func (w *Workload) reacquire(ctx context.Context, i int, rng *rand.Rand, locker *redlock.Locker, key string) {
	tok := token(i, rng)
	for n := range 2 + rng.IntN(8) {
		lock, obtained, ok := w.obtain(ctx, i, rng, locker, key, redlock.WithToken(tok))
		if !ok {
			return
		}
		w.holdAs(ctx, i, rng, lock, fmt.Sprintf("%s/%d", tok, n), obtained, 0)
	}
}
