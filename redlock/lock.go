package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/quorum"
)

// Lock is a held lock. Its methods are safe for concurrent use.
type Lock struct {
	locker *Locker
	kind   *lockKind // the scripts it runs: one key's, or several keys'
	key    string
	keys   []string
	token  string
	holder holder // what the scripts know this handle's hold by
	meta   string
	fence  uint64
	cfg    config
	// since is when the acquisition ended, for an Observer's hold time
	// (zero without one).
	since time.Time

	mu    sync.Mutex
	until time.Time
	// done is set by Release: the owner let go of the lock.
	done bool
	// lost is set, for good, once the servers said the lock is not ours.
	lost error
	// forceBorn is the Locker's count of ForceRelease calls when the lock
	// was obtained: a later one of its key explains a loss.
	forceBorn uint64

	// kept lists the lock's KeepAlives still running; guarded by the
	// Locker's extender's mu.
	kept []*keeper
}

// Key returns the lock's key; for a multi-key lock (ObtainMulti), its keys
// joined by commas, as messages name it (Keys lists them).
func (k *Lock) Key() string { return k.key }

// Token is the owner token on the nodes (WithToken reclaims the lock).
func (k *Lock) Token() string { return k.token }

// Metadata returns the metadata given with WithMetadata.
func (k *Lock) Metadata() string { return k.meta }

// Fence returns the lock's fencing token, or 0 unless WithFencing was given:
// a protected resource keeps the highest fence it accepted and rejects
// lower ones. Compare fences, do not count with them. A re-entered lock's
// fence is never below the outer's (docs/safety.md#fences-of-re-entered-locks).
func (k *Lock) Fence() uint64 { return k.fence }

// Until returns the local validity deadline, from this Lock's own TTL:
// until then no other owner can hold the lock, by this process's clock.
// Extend moves it; it asks no server.
func (k *Lock) Until() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.until
}

// Valid reports, asking no server, whether the lock is still ours: not
// released, not found lost (then it stays false), and Until not passed
// (then only a successful Extend makes it true again).
func (k *Lock) Valid() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.done && k.lost == nil && k.cfg.clock.Now().Before(k.until)
}

func (k *Lock) released() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.done
}

// releasedErr is the error of op on a handle that was released already.
func (k *Lock) releasedErr(op string) error {
	return fmt.Errorf("%w: %s %s: this Lock was released before", ErrReleased, op, quoteKey(k.key))
}

func (k *Lock) markLost(err error) {
	k.mu.Lock()
	if k.lost == nil {
		k.lost = err
	}
	k.mu.Unlock()
}

// Release takes this Lock's hold off the key on every node (the last hold
// deletes it) and wakes its waiters, or hands the lock to a waiting
// goroutine of the same Locker; its calls go out even when ctx has ended.
// It returns nil when a majority released, else an error matching
// ErrLockNotHeld (ErrLockExpired, ErrLockLost) or ErrNoQuorum. A Lock
// releases once: later calls return ErrReleased, asking no server.
func (k *Lock) Release(ctx context.Context) error {
	return k.release(ctx, "release", 0)
}

// ReleaseAfter is Release that keeps the key for hold (rounded up to the
// ms): a cooldown, in which nobody obtains it and waiters sleep on; another
// Lock with the same token keeps its hold. A negative hold, or one above
// WithRestartGuard's maximum TTL, is an ErrInvalid that leaves it held.
func (k *Lock) ReleaseAfter(ctx context.Context, hold time.Duration) error {
	if hold < 0 {
		return invalid("ReleaseAfter hold %v is negative", hold)
	}
	if g := k.cfg.guard; g > 0 && hold > g {
		return invalid("ReleaseAfter hold %v is above the restart guard's maximum TTL %v", hold, g)
	}
	// Rounded up: the cooldown is at least hold, and never 0 ("delete").
	return k.release(ctx, "release", serverMillis(hold))
}

func (k *Lock) release(ctx context.Context, op string, cooldownMs int64) (err error) {
	ctx, tr := k.cfg.obs.begin(ctx, OpRelease, k.key)
	defer func() { tr.released(ctx, k, err) }()
	k.mu.Lock()
	again := k.done
	k.done = true
	k.mu.Unlock()
	if again {
		// A second release would take away a hold that is not ours: the
		// outer hold of a re-entered lock, on the nodes the first reached.
		return k.releasedErr(op)
	}
	// Work that watches a KeepAlive context must stop now, not run on as
	// if it held the lock.
	k.locker.ext.endLock(k, ErrReleased)
	res, err := k.releaseRound(ctx, cooldownMs)
	if err != nil {
		return err
	}
	if res.OK {
		return nil
	}
	return withContext(ctx, k.notHeld(ctx, op, &res))
}

// releaseLinger is how much longer than the node timeout a release waits
// for its calls' answers. Each call has the node timeout once it is sent;
// but under load it may first wait in its node's queue for longer than
// that, behind the batches before it, and its compare-and-delete still
// runs. A release that gave up at the node timeout would then report a
// failure for keys that it deleted. So it waits for the answers (a node
// that is down or hangs still fails its call within the node timeout of
// sending it) unless ctx has ended, at most until the lock's validity ends:
// its keys expire on their own soon after.
func (k *Lock) releaseLinger() time.Duration {
	k.mu.Lock()
	until := k.until
	k.mu.Unlock()
	return until.Sub(k.cfg.clock.Now()) - k.cfg.nodeTimeout
}

// Extend makes the keys live at least ttl more (plus WithLockDelay's delay)
// where this Lock's hold is on them, never shorter, and succeeds when a
// majority did within the new validity; Until then moves to ttl from the
// call's start. On failure Until is unchanged: ErrLockExpired or ErrLockLost
// are final (Valid turns false), ErrNoQuorum is not; ErrReleased after a
// release, ErrInvalid for a bad ttl.
func (k *Lock) Extend(ctx context.Context, ttl time.Duration) (err error) {
	ctx, tr := k.cfg.obs.begin(ctx, OpExtend, k.key)
	defer func() { tr.done(ctx, err) }()
	cfg := k.cfg
	cfg.ttl = ttl
	if err := cfg.validate(); err != nil {
		return err
	}
	k.mu.Lock()
	lost, done := k.lost, k.done
	k.mu.Unlock()
	if done {
		// The keys may still be there (a cooldown, an outer hold), but
		// they are not this handle's to keep.
		return k.releasedErr("extend")
	}
	if lost != nil {
		return lost
	}
	c := k.kind.extend(k.keys, k.holder, serverMillis(cfg.serverTTL()), cfg.nodeTimeout)
	var validity time.Duration
	start := cfg.clock.Now()
	res, err := k.locker.call(ctx, round[int64]{
		timeout: cfg.nodeTimeout,
		start:   k.locker.observeNodes(OpExtend, k.key, k.locker.sender(cfg.nodeTimeout, c, decodeCompare, nil)),
		accept: func(*quorum.Result[int64]) bool {
			validity = clock.Validity(ttl, cfg.clock.Since(start), cfg.driftFactor)
			return validity > 0
		},
	})
	if err != nil {
		return err
	}
	if res.OK {
		k.mu.Lock()
		k.until = start.Add(validity)
		k.mu.Unlock()
		// A KeepAlive's warning follows Until, also when it moved earlier.
		k.locker.ext.moved(k)
		return nil
	}
	// A majority that was too slow to leave any validity is an outage
	// (ErrNoQuorum), as notHeld tells it.
	err = withContext(ctx, k.notHeld(ctx, "extend", &res))
	if errors.Is(err, ErrLockNotHeld) {
		k.markLost(err)
	}
	return err
}

// TTL is how long a majority of nodes still hold this Lock's key (no drift
// margin or lock-delay: see Until). It fails with ErrLockNotHeld off a
// majority, ErrNoQuorum on an outage, ErrReleased after a release.
func (k *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if k.released() {
		return 0, k.releasedErr("ttl")
	}
	// Every node is waited for (up to the node timeout), so that TTL sees
	// every change acknowledged before it; OK then means a majority said
	// Yes.
	timeout := k.cfg.nodeTimeout
	c := k.kind.pttl(k.keys, k.holder, timeout)
	res, err := k.locker.call(ctx, round[int64]{
		timeout: timeout,
		waitAll: true,
		start:   k.locker.observeNodes(OpTTL, k.key, k.locker.sender(timeout, c, decodePTTL, nil)),
	})
	if err != nil {
		return 0, err
	}
	if !res.OK {
		return 0, withContext(ctx, k.notHeld(ctx, "ttl", &res))
	}
	ttls := make([]int64, 0, res.Yes)
	for _, r := range res.Replies {
		if r.Vote == quorum.Yes {
			v := r.Value
			if v < 0 {
				v = math.MaxInt64 // no expiry
			}
			ttls = append(ttls, v)
		}
	}
	slices.Sort(ttls)
	slices.Reverse(ttls)
	v := ttls[k.locker.need-1]
	if v == math.MaxInt64 {
		return -1, nil
	}
	// The lock-delay is the servers' part, not the holder's: the lock ends
	// when the TTL does.
	return max(time.Duration(v)*time.Millisecond-k.cfg.lockDelay, 0), nil
}
