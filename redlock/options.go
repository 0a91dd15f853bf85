package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/conn"

	"math"
	"strings"
	"time"

	"github.com/quorumlock/redlock/clock"
)

// Defaults of the options.
const (
	DefaultTTL         = 8 * time.Second
	DefaultDriftFactor = clock.DefaultDriftFactor
	DefaultNodeTimeout = 50 * time.Millisecond
	// MaxTokenLen bounds tokens given with WithToken.
	MaxTokenLen = 256
	// MaxMetadataLen bounds metadata given with WithMetadata, in bytes:
	// it travels to every node with every acquisition.
	MaxMetadataLen = 4096
)

// DefaultRetry is the retry strategy of Obtain unless WithRetry says
// otherwise: exponential backoff from 8 ms to 512 ms, until the context ends.
var DefaultRetry = ExponentialBackoff(8*time.Millisecond, 512*time.Millisecond)

// Option configures a Locker: it is given to New or NewFromURLs. Bad
// values make New fail with an error matching ErrInvalid.
type Option interface {
	apply(*config)
}

// LockOption configures locks. Given to New it is the default of every
// call of the Locker; given to a call (Obtain, TryObtain, ObtainMulti, Do,
// Campaign) it applies to that call only, and bad values fail the call with
// an error matching ErrInvalid. Options that only New takes (the restart
// guard, the Observer, the go-redis logger) are Options, not LockOptions:
// the compiler refuses them in a call.
type LockOption interface {
	Option
	lockOption()
}

// lockerOption is an Option of the Locker alone.
type lockerOption func(*config)

func (o lockerOption) apply(c *config) { o(c) }

// lockOption is an Option that a call may give too.
type lockOption func(*config)

func (o lockOption) apply(c *config) { o(c) }
func (lockOption) lockOption()       {}

type config struct {
	ttl         time.Duration
	driftFactor float64
	nodeTimeout time.Duration
	retry       RetryStrategy
	metadata    string
	token       string
	tokenSet    bool
	fencing     bool
	// confirmFence: the fence is written back to every node in a round
	// the acquisition waits for, even when the granting majority agreed
	// on it, so that each node's hold carries its fence (Campaign: the
	// term that Leader reports).
	confirmFence bool
	failFast     bool
	pollingOnly  bool
	guard        time.Duration
	lockDelay    time.Duration
	clock        clock.Clock
	// clockID is the clock's identity, which any clock has, comparable or
	// not: nil for the default, one per withClock option. KeepAlive's
	// rounds group locks by it (extendGroup).
	clockID *clock.Clock
	// fenceLife is how long a fencing counter outlives the lock key it
	// was last written with; defaultFenceLifetime but in tests.
	fenceLife time.Duration
	obs       *observer   // WithObserver; nil: none
	redisLog  *conn.Route // WithRedisLogger; nil: quiet
}

// confirmFence is Campaign's option: see config.confirmFence.
var confirmFence LockOption = lockOption(func(c *config) { c.confirmFence = true })

// defaultFenceLifetime is how long a key's fencing counter stays on a node
// after its last grant or write-back (plus the lock's TTL). A week keeps the
// counters of keys locked daily or weekly, and asks of the servers' clocks
// only that they are not a week behind the fences they handed out.
const defaultFenceLifetime = 7 * 24 * time.Hour

// fenceLifetime is the expiry given to a fencing counter at each write: it
// outlives the lock key set with it by fenceLife.
func (c *config) fenceLifetime() time.Duration { return c.fenceLife + c.ttl }

func defaultConfig() config {
	return config{
		ttl:         DefaultTTL,
		driftFactor: DefaultDriftFactor,
		nodeTimeout: DefaultNodeTimeout,
		retry:       DefaultRetry,
		clock:       clock.Real,
		fenceLife:   defaultFenceLifetime,
	}
}

// WithTTL sets how long the lock lives on the servers before it expires by
// itself (the servers keep the key WithLockDelay's delay longer). The lock is
// safe to use for less: the TTL minus the time the acquisition took minus the
// drift. Default 8s.
func WithTTL(ttl time.Duration) LockOption { return lockOption(func(c *config) { c.ttl = ttl }) }

// WithDriftFactor sets the share of the TTL reserved for clock drift between
// this process and the servers; 2 ms are added for Redis's expiry precision.
// It must be in [0, 1). Default 0.01.
func WithDriftFactor(f float64) LockOption { return lockOption(func(c *config) { c.driftFactor = f }) }

// WithNodeTimeout bounds each call to one node. It should be far below the
// TTL: a node slower than this counts as failed for that round. It bounds
// every wait on the node whatever the client's own timeouts say; the value
// given to New also bounds each new connection (dial and TLS handshake) and
// every wait of the release subscriptions. Default 50ms.
func WithNodeTimeout(d time.Duration) LockOption {
	return lockOption(func(c *config) { c.nodeTimeout = d })
}

// WithRetry sets how Obtain waits between attempts. Default DefaultRetry.
// TryObtain ignores it.
func WithRetry(s RetryStrategy) LockOption { return lockOption(func(c *config) { c.retry = s }) }

// WithMetadata attaches a string to the lock, stored with it on every node
// (who holds it, for what). Default empty. Metadata longer than
// MaxMetadataLen bytes fails with an error matching ErrInvalid.
func WithMetadata(md string) LockOption { return lockOption(func(c *config) { c.metadata = md }) }

// WithToken sets the owner token instead of a random one, to reclaim a lock
// by its token (from another process, after a restart). The token must be
// non-empty, at most MaxTokenLen bytes, and contain no NUL byte, or the call
// fails with an error matching ErrInvalid. Default: a random UUID for each
// lock.
//
// Where the token already holds the key, the acquisition is a re-entry: it
// adds a hold of this Lock's own, which its Release takes away again (the
// last hold deletes the key); Release, ReleaseAfter and Extend of one Lock
// never touch another's hold. A re-entry only ever lengthens the key's TTL
// on each node, so it never cuts short the time another Lock with the same
// token counts on. Each Lock's Until is counted from its own TTL. With
// WithFencing a re-entry's fence is never below the outer lock's (see
// Lock.Fence). Details: docs/safety.md, "Re-entry, exactly".
func WithToken(token string) LockOption {
	return lockOption(func(c *config) { c.token, c.tokenSet = token, true })
}

// WithFencing turns on fencing tokens: each lock carries Fence(), a number
// strictly greater than every earlier holder's fence for the key.
//
// Each node keeps a counter per key (redlock:fence:KEY) and raises it, in the
// step that grants the lock, to max(counter+1, the server's clock in µs);
// the lock's fence is the maximum over the granting majority. Before Obtain
// returns, a majority of nodes count at least that far: they answered it, or
// it is written back to them. Fences of successive holders strictly
// increase while the nodes keep their counters. A counter expires seven days
// (plus the lock's TTL) after its last grant or write-back, so keys locked
// once do not keep memory forever; a node that lost its counter that way, or
// with its memory (restart, reload of older data, promotion of a replica,
// eviction, flush), starts again from its clock. Fences still increase then,
// provided the node's clock is not behind earlier fences by seven days after
// an expiry, or by the restart guard's maximum TTL after a loss the guard
// caught (it keeps the node out of every vote that long): use
// WithRestartGuard unless every node keeps every write (appendfsync always,
// no replica failover, no eviction). A lock kept by Extend for more than
// seven days may see its counter expire while held: a node that holds the
// key but lost the counter starts it again from its clock at the next
// re-entry, whose fence is then higher than the outer's (see Lock.Fence).
//
// It costs no extra round trip when a majority of the granting nodes answer
// the same fence, the usual case (they granted the same holders, and the
// clock counts in 100ms windows); one more when they do not. Default off.
func WithFencing() LockOption { return lockOption(func(c *config) { c.fencing = true }) }

// WithRestartGuard protects against nodes that forget the locks they
// granted. Each node keeps a marker key without expiry (redlock:guard:marker)
// stamped with the server's run_id and its count of evicted keys (INFO
// server and stats). The acquire script reads both on every call; a marker
// that is missing or carries another stamp means the node may have lost
// writes: it was flushed, its process restarted (with no persistence, or
// reloading an RDB snapshot or an AOF that lacks the last writes, as
// appendfsync everysec may after a crash), it is a replica promoted to
// master, or it evicted keys. The node then records the moment, re-stamps
// the marker, and abstains from granting any lock (an ABSTAIN error reply)
// until maxTTL has passed, by when every lock it forgot has expired. Every
// process start costs the node maxTTL out of the vote, even with
// appendfsync always: the run_id cannot tell a clean restart from a lossy
// one. A node whose maxmemory-policy may evict keys (any policy but
// noeviction, with maxmemory set) is refused at first contact (Bootstrap, or
// the acquisition that would stamp its marker) with an ABSTAIN error naming
// the policy, and stays unstamped, so refused, while so configured; one
// switched to such a policy later is caught by its count of evicted keys at
// the first acquisition after an eviction, before it can grant again.
//
// It assumes that nothing but this library deletes or rewrites its keys
// (a DEL of one lock key goes unseen; FLUSHDB and FLUSHALL are seen, they
// remove the marker) and that the node's clock runs at about the right rate
// (the quarantine is a key with a TTL). It needs Redis 7.0 or later.
//
// maxTTL must be at least every TTL (plus WithLockDelay's delay) used with
// the Locker, and every cooldown given to Lock.ReleaseAfter: longer ones are
// rejected. A fresh
// cluster abstains likewise on first use unless seeded with
// Locker.Bootstrap. Give it to New: it is a property of the cluster, not of
// one call. Default off.
func WithRestartGuard(maxTTL time.Duration) Option {
	return lockerOption(func(c *config) {
		c.guard = maxTTL
		if maxTTL == 0 {
			c.guard = -1 // "on with zero" is a mistake, not "off"
		}
	})
}

// WithLockDelay keeps a lock's key on the servers for d after its TTL, so
// that a lock that ends without a release (its holder died, or paused past
// its validity) is not granted to anyone for d after it expires, as Chubby's
// and Consul's lock-delay do. A holder that wakes up within d of its
// deadline then finds the key still its own instead of sharing it with a
// new holder: a double holder becomes a stall. Release and ForceRelease
// delete the key at once, so a clean end costs nothing; the keys live
// TTL + d on the servers (acquisition, re-entry, handoff, Extend,
// KeepAlive), while the lock's validity (Until, Valid) still comes from the
// TTL alone. The price: a crashed holder blocks the key for TTL + d instead
// of TTL. d must not be negative, and with WithRestartGuard the TTL plus d
// must not exceed the guard's maximum TTL (the guard must outlast every
// key). Default 0 (off).
func WithLockDelay(d time.Duration) LockOption {
	return lockOption(func(c *config) { c.lockDelay = d })
}

// serverTTL is how long the servers keep a lock's key: its TTL, plus the
// lock-delay that keeps it from the next holder after an unclean end.
func (c *config) serverTTL() time.Duration { return c.ttl + c.lockDelay }

// WithFailFast makes Obtain give up at once, with ErrNotObtained, when the
// current holder's keys outlive the context's deadline: waiting could not
// succeed in time. Without a deadline it changes nothing. Default off.
func WithFailFast() LockOption { return lockOption(func(c *config) { c.failFast = true }) }

// WithPollingOnly makes Obtain wait on its retry timer alone, without the
// release notifications that wake waiters as soon as the holder releases.
// Default off (notifications on).
func WithPollingOnly() LockOption { return lockOption(func(c *config) { c.pollingOnly = true }) }

// withClock sets the time source used for validity arithmetic (tests
// only; default clock.Real).
func withClock(c clock.Clock) LockOption {
	id := &c
	return lockOption(func(cfg *config) { cfg.clock, cfg.clockID = c, id })
}

// applyAll applies opts in order; a nil option is skipped.
func applyAll[O Option](c *config, opts []O) {
	for _, o := range opts {
		if Option(o) != nil {
			o.apply(c)
		}
	}
}

func (c *config) validate() error {
	switch {
	case c.ttl <= 0:
		return invalid("TTL %v must be positive", c.ttl)
	case math.IsNaN(c.driftFactor) || c.driftFactor < 0 || c.driftFactor >= 1:
		return invalid("drift factor %v must be in [0, 1)", c.driftFactor)
	case c.nodeTimeout <= 0:
		return invalid("node timeout %v must be positive", c.nodeTimeout)
	case c.clock == nil:
		return invalid("nil clock")
	case c.obs.invalid():
		return invalid("nil Observer")
	case c.tokenSet && c.token == "":
		return invalid("empty token")
	case len(c.token) > MaxTokenLen:
		return invalid("token longer than %d bytes", MaxTokenLen)
	case strings.IndexByte(c.token, 0) >= 0:
		return invalid("token contains a NUL byte")
	case len(c.metadata) > MaxMetadataLen:
		return invalid("metadata of %d bytes is longer than %d", len(c.metadata), MaxMetadataLen)
	case c.guard < 0:
		return invalid("restart guard maximum TTL must be positive")
	case c.guard > 0 && c.ttl > c.guard:
		return invalid("TTL %v is above the restart guard's maximum TTL %v", c.ttl, c.guard)
	case c.lockDelay < 0:
		return invalid("lock-delay %v must not be negative", c.lockDelay)
	case c.lockDelay > math.MaxInt64-c.ttl:
		return invalid("TTL %v plus lock-delay %v is out of range", c.ttl, c.lockDelay)
	case c.guard > 0 && c.serverTTL() > c.guard:
		return invalid("TTL %v plus lock-delay %v is above the restart guard's maximum TTL %v", c.ttl, c.lockDelay, c.guard)
	}
	if drift := clock.Drift(c.ttl, c.driftFactor); c.ttl <= drift {
		return invalid("TTL %v is not above the clock drift %v", c.ttl, drift)
	} else if c.nodeTimeout >= c.ttl-drift {
		return invalid("node timeout %v leaves no validity within TTL %v (drift %v)", c.nodeTimeout, c.ttl, drift)
	}
	return validateStrategy(c.retry)
}
