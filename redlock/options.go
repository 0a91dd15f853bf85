package redlock

import (
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/settings"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Defaults of the options.
const (
	DefaultTTL         = 8 * time.Second
	DefaultDriftFactor = clock.DefaultDriftFactor
	DefaultNodeTimeout = 50 * time.Millisecond
	MaxTokenLen        = 256  // bytes of WithToken
	MaxMetadataLen     = 4096 // bytes of WithMetadata
)

// DefaultRetry is the retry strategy of Obtain unless WithRetry says
// otherwise: exponential backoff from 8 ms to 512 ms, until the context ends.
var DefaultRetry = ExponentialBackoff(8*time.Millisecond, 512*time.Millisecond)

// Option configures a Locker: it is given to New or NewFromURLs. Bad
// values make New fail with an error matching ErrInvalid.
type Option interface {
	apply(*config)
}

// LockOption configures locks: given to New, every call's default; given
// to a call (Obtain, TryObtain, ObtainMulti, Do, Campaign), that call's,
// whose bad values then fail it with ErrInvalid.
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
	// layout is how the nodes name the library's own keys: a cluster's
	// in each lock's slot, once any node is a cluster (set by NewNodes,
	// no option).
	layout      wire.Layout
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
	// was last written with (WithFenceLifetime).
	fenceLife time.Duration
	// fenceLifeAnyway lets a test set a lifetime below minFenceLifetime.
	fenceLifeAnyway bool
	obs             *observer   // WithObserver; nil: none
	redisLog        *conn.Route // WithRedisLogger; nil: quiet
	// logger gets the Locker's warnings (WithLogger); outageLog is how
	// long an Obtain waits out an outage before it says so, and how often
	// it says so again.
	logger    *slog.Logger
	loggerSet bool
	outageLog time.Duration
}

// confirmFence is Campaign's option: see config.confirmFence.
var confirmFence LockOption = lockOption(func(c *config) { c.confirmFence = true })

// defaultFenceLifetime is how long a key's fencing counter stays on a node
// after its last grant or write-back (plus the lock's TTL): memory follows
// the keys locked in the last few minutes, not every key ever locked. The
// fences stay above earlier ones while no server's clock steps back by
// this much and no two servers' clocks differ by this much
// (docs/safety.md#how-long-a-counter-lives).
const defaultFenceLifetime = 5 * time.Minute

// minFenceLifetime bounds WithFenceLifetime from below: a counter that
// expired starts again from its node's clock less up to two 100 ms windows
// (acquire.lua), so a lifetime of 400 ms or less would let the next fence
// fall below the last even with perfect clocks; 1 s leaves 600 ms for a
// clock that steps back (docs/safety.md#how-long-a-counter-lives).
const minFenceLifetime = time.Second

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
		outageLog:   DefaultOutageLog,
	}
}

// DefaultOutageLog is how long an Obtain or Do waits out an outage before
// the logger hears of it, and how often again while it lasts.
const DefaultOutageLog = 10 * time.Second

// WithLogger sets where the Locker's warnings go, at slog.LevelWarn: each
// change of a node's state (down, back, replica, misconfigured,
// abstaining, the same server as another node), with how many more node
// failures the locks survive; and an Obtain or Do that has waited out an
// outage for DefaultOutageLog, again every DefaultOutageLog while it
// lasts. Default slog.Default(); nil is an ErrInvalid (to silence it, give
// slog.New(slog.DiscardHandler)).
func WithLogger(logger *slog.Logger) Option {
	return lockerOption(func(c *config) { c.logger, c.loggerSet = logger, true })
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

// WithNodeTimeout bounds each call to one node, whatever the client's own
// timeouts say; a slower node counts as failed for that round. New's value
// also bounds each dial and TLS handshake. It must leave validity within
// the TTL. Default 50ms.
func WithNodeTimeout(d time.Duration) LockOption {
	return lockOption(func(c *config) { c.nodeTimeout = d })
}

// WithRetry sets how Obtain (not TryObtain) waits between attempts.
func WithRetry(s RetryStrategy) LockOption { return lockOption(func(c *config) { c.retry = s }) }

// WithMetadata attaches a string to the lock, stored with it on every node
// (who holds it, for what). Default empty. Metadata longer than
// MaxMetadataLen bytes fails with an error matching ErrInvalid.
func WithMetadata(md string) LockOption { return lockOption(func(c *config) { c.metadata = md }) }

// WithToken sets the owner token instead of a random UUID, to reclaim a
// lock by its token (from another process, after a restart). Where the
// token holds the key already, the acquisition is a re-entry: a hold of
// this Lock's own, which only its Release, ReleaseAfter and Extend touch
// (docs/safety.md#re-entry-exactly). A token that is empty, longer than
// MaxTokenLen bytes or holds a NUL byte is an ErrInvalid.
func WithToken(token string) LockOption {
	return lockOption(func(c *config) { c.token, c.tokenSet = token, true })
}

// WithFencing gives each lock a fence (Lock.Fence): a number strictly
// greater than every earlier holder's fence for the key, while the nodes
// keep their counters; use WithRestartGuard unless every node keeps every
// write. It costs no extra round trip when the granting majority agree on
// the fence, the usual case (docs/safety.md#fencing-tokens). Default off.
func WithFencing() LockOption { return lockOption(func(c *config) { c.fencing = true }) }

// WithFenceLifetime sets how long a key's fencing counter stays on the
// nodes after its last grant or write-back, plus the lock's TTL. Fences
// keep growing across an expiry while no server's clock steps back by d and
// no two servers' clocks differ by d (docs/safety.md#how-long-a-counter-lives);
// memory grows with d times the rate of new keys. It must be at least 1s.
// Default 5m.
func WithFenceLifetime(d time.Duration) LockOption {
	return lockOption(func(c *config) { c.fenceLife = d })
}

// WithRestartGuard keeps a node that may have forgotten the locks it
// granted out of every vote until maxTTL, at least every TTL plus
// lock-delay and ReleaseAfter cooldown used, has passed; a fresh cluster
// abstains until Locker.Bootstrap. Needs Redis 7.0; default off
// (docs/safety.md#restart-guard).
func WithRestartGuard(maxTTL time.Duration) Option {
	return lockerOption(func(c *config) {
		c.guard = maxTTL
		if maxTTL == 0 {
			c.guard = -1 // "on with zero" is a mistake, not "off"
		}
	})
}

// WithLockDelay keeps a lock's key on the servers for d after its TTL, so a
// lock that ends unreleased (a dead or paused holder) goes to nobody for d
// after it expires (Chubby's lock-delay); Release deletes it at once. Until
// and Valid still use the TTL. d ≥ 0, and with WithRestartGuard TTL+d must
// not exceed its maximum TTL (docs/safety.md#lock-delay). Default 0 (off).
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
	if err := settings.Timing(c.ttl, c.driftFactor, c.nodeTimeout, c.guard); err != nil {
		return invalid("%v", err)
	}
	switch {
	case c.clock == nil:
		return invalid("nil clock")
	case c.obs.invalid():
		return invalid("nil Observer")
	case c.loggerSet && c.logger == nil:
		return invalid("nil logger (slog.New(slog.DiscardHandler) discards)")
	case c.tokenSet && c.token == "":
		return invalid("empty token")
	case len(c.token) > MaxTokenLen:
		return invalid("token longer than %d bytes", MaxTokenLen)
	case strings.IndexByte(c.token, 0) >= 0:
		return invalid("token contains a NUL byte")
	case len(c.metadata) > MaxMetadataLen:
		return invalid("metadata of %d bytes is longer than %d", len(c.metadata), MaxMetadataLen)
	case c.fenceLife < minFenceLifetime && !c.fenceLifeAnyway:
		return invalid("fence lifetime %v is below %v: fences could go back across an expiry", c.fenceLife, minFenceLifetime)
	case c.fenceLife > math.MaxInt64-c.ttl:
		return invalid("TTL %v plus fence lifetime %v is out of range", c.ttl, c.fenceLife)
	case c.lockDelay < 0:
		return invalid("lock-delay %v must not be negative", c.lockDelay)
	case c.lockDelay > math.MaxInt64-c.ttl:
		return invalid("TTL %v plus lock-delay %v is out of range", c.ttl, c.lockDelay)
	case c.guard > 0 && c.serverTTL() > c.guard:
		return invalid("TTL %v plus lock-delay %v is above the restart guard's maximum TTL %v", c.ttl, c.lockDelay, c.guard)
	}
	return validateStrategy(c.retry)
}
