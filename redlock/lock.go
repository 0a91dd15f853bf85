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

// Token returns the owner token stored on the nodes. Passing it to
// WithToken reclaims the lock.
func (k *Lock) Token() string { return k.token }

// Metadata returns the metadata given with WithMetadata.
func (k *Lock) Metadata() string { return k.meta }

// Fence returns the lock's fencing token, or 0 unless WithFencing was given.
// A protected resource keeps the highest fence it has accepted and rejects
// writes with a lower one. Fences follow the servers' clocks (about the
// microseconds since 1970, plus one per holder): compare them, do not count
// with them.
//
// A re-entered lock (WithToken while the token holds the key) has a fence
// never below the outer lock's, read from the counters, which never go
// back: usually the outer's, higher where a node of its majority counted
// past it (it granted the outer late, lost the key, or lost its counter).
// A higher fence is written back, so a resource that accepts it then
// refuses the outer's: write through the innermost hold.
func (k *Lock) Fence() uint64 { return k.fence }

// Until returns the local validity deadline: the time until which no other
// owner can hold the lock, by this process's clock. Extend moves it. It is
// computed locally and asks no server, from this Lock's own TTL: the keys
// may live longer than it says (another Lock with the same token asked for
// more), but no re-entry or Extend makes them live shorter.
func (k *Lock) Until() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.until
}

// Valid reports whether the lock is still ours by the local deadline: it has
// not been released or found lost, and Until has not passed. It asks no
// server. Once a loss was found (by Extend or KeepAlive) it stays false;
// after Until passed it turns true again only through an Extend that
// succeeds, which finds this Lock's own hold still on a majority.
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

// Release gives up the lock: on every node where this Lock's hold is on the
// key (compare-and-delete) it takes the hold away, and the last hold deletes
// the key; another Lock with the same token keeps its own. It returns once a
// majority has answered; the other nodes finish in the background. A node
// that is down or hangs fails its call within the node timeout of sending
// it, but a release waits for its calls even when they are slow to go out
// (on a busy process, queued behind others): past the node timeout unless
// ctx has ended, and at most until the lock's validity ends, so that it
// reports what the nodes did rather than a timeout for keys it deleted. An
// ended ctx does not stop a release: its calls are sent all the same, and
// it waits for them up to the node timeout. Waiters
// on the key are woken; if one is a goroutine of this Locker, the lock may
// instead pass to it in the same round trip, the key never free in between
// (a handoff; see Locker.Obtain). The lock is no longer Valid afterwards,
// whatever the outcome, and the contexts KeepAlive returned for it end as
// Release begins, with cause ErrReleased.
//
// It returns nil when a majority released. Otherwise the error matches
// ErrLockNotHeld and tells why, ErrLockExpired (our keys were gone) or
// ErrLockLost (another owner holds the key), or matches ErrNoQuorum when too
// many nodes could not be reached to tell; keys left behind expire by their
// TTL.
//
// A Lock releases at most once, even when that release failed: every later
// Release or ReleaseAfter returns an error matching ErrReleased (and
// ErrLockNotHeld) without asking the servers, since a second release of a
// re-entered lock would take away a hold that belongs to another Lock with
// the same token.
func (k *Lock) Release(ctx context.Context) error {
	return k.release(ctx, "release", 0)
}

// ReleaseAfter gives up the lock but keeps its key for hold, so that nobody
// obtains it for that long: a job that must run at most once per interval
// releases with the rest of the interval as its cooldown. The key then
// expires by itself; waiters are not woken early. The hold is rounded up to
// the millisecond. A hold of 0 is Release. Like Release, ReleaseAfter acts
// at most once per Lock, on this Lock's hold only: where another Lock with
// the same token still holds the key, the key lives at least hold more and
// that hold stays.
//
// A negative hold, or with WithRestartGuard one above the guard's maximum
// TTL, is an error matching ErrInvalid, does not count as the handle's
// release, and leaves the lock held as it was: a node that lost its memory
// votes again after the maximum TTL, so a longer cooldown would not survive
// its restart. Other errors are as for Release.
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
	return withContext(ctx, k.notHeld(op, &res))
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

// Extend makes the lock's keys live at least ttl more on every node where
// this Lock's hold is on them (compare-and-pexpire), and succeeds only when a
// majority did so within the new validity; Until then moves to the deadline
// that ttl gives, counted from the start of the call. Extend only ever
// lengthens: a key that has more than ttl left keeps it (another Lock with
// the same token, a re-entry or a reclaim, may count on it), and a key
// without expiry keeps none; so an Extend with a shorter TTL can move Until
// earlier while the keys live on, and a KeepAlive's warning with it. The
// TTL sent is ttl rounded up to the millisecond. With WithLockDelay the
// keys live ttl plus the delay, the validity comes from ttl alone. A ttl out of range (see WithTTL,
// WithLockDelay) fails with an error matching ErrInvalid and asks no server.
//
// On failure the deadline is unchanged. After Release or ReleaseAfter it
// fails with an error matching ErrReleased (and ErrLockNotHeld) without
// asking the servers: a cooldown or an outer hold left on the nodes is not
// this handle's to extend. When the servers say the lock is not ours
// (ErrLockExpired, ErrLockLost, both matching ErrLockNotHeld) the lock is
// lost for good: Valid turns false and later calls to Extend return the same
// error without asking the servers. An outage (ErrNoQuorum) leaves the lock
// valid until its deadline.
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
		start:   k.locker.observeNodes(OpExtend, k.key, k.locker.sender(cfg.nodeTimeout, c.script, c.keys, c.args, decodeCompare, nil)),
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
	err = withContext(ctx, k.notHeld("extend", &res))
	if errors.Is(err, ErrLockNotHeld) {
		k.markLost(err)
	}
	return err
}

// TTL asks the servers how long the lock has left: the largest time that a
// majority of nodes still hold our key for (the shortest among the majority
// that holds it longest). It is the servers' view and includes no drift
// margin; use Until for the safe local deadline. With WithLockDelay the
// servers keep the keys that much longer; TTL leaves the delay out, and
// reports 0 when only the delay is left.
//
// It fails with an error matching ErrLockNotHeld when our token is not on a
// majority, or ErrNoQuorum when too many nodes could not be reached. After
// Release or ReleaseAfter it fails with an error matching ErrReleased (and
// ErrLockNotHeld) without asking the servers: a cooldown, or the hold of an
// outer Lock with the same token, is not this handle's time.
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
		start:   k.locker.observeNodes(OpTTL, k.key, k.locker.sender(timeout, c.script, c.keys, c.args, decodePTTL, nil)),
	})
	if err != nil {
		return 0, err
	}
	if !res.OK {
		return 0, withContext(ctx, k.notHeld("ttl", &res))
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
