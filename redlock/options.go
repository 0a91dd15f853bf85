package redlock

import (
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
)

// DefaultRetry is the retry strategy of Obtain unless WithRetry says
// otherwise: exponential backoff from 8 ms to 512 ms, until the context ends.
var DefaultRetry = ExponentialBackoff(8*time.Millisecond, 512*time.Millisecond)

// Option configures a Locker (as a default for every call, given to New) or
// one Obtain, TryObtain or Do call. Bad values are reported as errors
// matching ErrInvalid, by New or by the call.
type Option func(*config)

type config struct {
	ttl         time.Duration
	driftFactor float64
	nodeTimeout time.Duration
	retry       RetryStrategy
	metadata    string
	token       string
	tokenSet    bool
	fencing     bool
	failFast    bool
	pollingOnly bool
	guard       time.Duration
	clock       clock.Clock
}

func defaultConfig() config {
	return config{
		ttl:         DefaultTTL,
		driftFactor: DefaultDriftFactor,
		nodeTimeout: DefaultNodeTimeout,
		retry:       DefaultRetry,
		clock:       clock.Real,
	}
}

// WithTTL sets how long the lock lives on the servers before it expires by
// itself. The lock is safe to use for less: the TTL minus the time the
// acquisition took minus the drift. Default 8s.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithDriftFactor sets the share of the TTL reserved for clock drift between
// this process and the servers; 2 ms are added for Redis's expiry precision.
// It must be in [0, 1). Default 0.01.
func WithDriftFactor(f float64) Option { return func(c *config) { c.driftFactor = f } }

// WithNodeTimeout bounds each call to one node. It should be far below the
// TTL: a node slower than this counts as failed for that round. Default 50ms.
func WithNodeTimeout(d time.Duration) Option { return func(c *config) { c.nodeTimeout = d } }

// WithRetry sets how Obtain waits between attempts. Default DefaultRetry.
// TryObtain ignores it.
func WithRetry(s RetryStrategy) Option { return func(c *config) { c.retry = s } }

// WithMetadata attaches a string to the lock, stored with it on every node
// (who holds it, for what). Default empty.
func WithMetadata(md string) Option { return func(c *config) { c.metadata = md } }

// WithToken sets the owner token instead of a random one, to reclaim a lock
// by its token (from another process, after a restart). The token must be
// non-empty, at most MaxTokenLen bytes, and contain no NUL byte, or the call
// fails with an error matching ErrInvalid. Default: a random UUID for each
// lock.
//
// Where the token already holds the key, the acquisition is a re-entry: it
// adds one hold, which its own Release takes away again (the last hold
// deletes the key). A re-entry only ever lengthens the key's TTL on each
// node, to the longer of what is left and the new TTL (a key without expiry
// keeps none), so it never cuts short the time another Lock with the same
// token counts on; Extend does the same. Each Lock's Until is still counted
// from its own TTL, so it is never later than what the servers hold. With
// WithFencing a re-entry has the outer lock's fence, except as Lock.Fence
// says.
func WithToken(token string) Option {
	return func(c *config) { c.token, c.tokenSet = token, true }
}

// WithFencing turns on fencing tokens: each lock carries Fence(), a number
// strictly greater than every earlier holder's fence for the key, as long as
// the nodes keep their counters, or, for nodes that lose them, as long as the
// servers' clocks agree to within the restart guard's maximum TTL (use
// WithRestartGuard with non-persistent nodes). It costs one more round trip
// per acquisition. Default off.
func WithFencing() Option { return func(c *config) { c.fencing = true } }

// WithRestartGuard protects against nodes that restart without persistence
// (or are flushed) and so forget the locks they granted: such a node notices
// the loss in the acquire script itself, through a marker key without expiry,
// and abstains from granting any lock until maxTTL has passed, by when every
// lock it forgot has expired. maxTTL must be at least every TTL used with the
// Locker: longer TTLs are rejected. A fresh cluster abstains likewise on first
// use unless seeded with Locker.Bootstrap. Give it to New: it is a property
// of the cluster, not of one call. Default off.
func WithRestartGuard(maxTTL time.Duration) Option {
	return func(c *config) {
		c.guard = maxTTL
		if maxTTL == 0 {
			c.guard = -1 // "on with zero" is a mistake, not "off"
		}
	}
}

// WithFailFast makes Obtain give up at once, with ErrNotObtained, when the
// current holder's keys outlive the context's deadline: waiting could not
// succeed in time. Without a deadline it changes nothing. Default off.
func WithFailFast() Option { return func(c *config) { c.failFast = true } }

// WithPollingOnly makes Obtain wait on its retry timer alone, without the
// release notifications that wake waiters as soon as the holder releases.
// Default off (notifications on).
func WithPollingOnly() Option { return func(c *config) { c.pollingOnly = true } }

// WithClock sets the time source used for validity arithmetic. Default
// clock.Real.
func WithClock(c clock.Clock) Option { return func(cfg *config) { cfg.clock = c } }

func (c *config) apply(opts []Option) {
	for _, o := range opts {
		if o != nil {
			o(c)
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
	case c.tokenSet && c.token == "":
		return invalid("empty token")
	case len(c.token) > MaxTokenLen:
		return invalid("token longer than %d bytes", MaxTokenLen)
	case strings.IndexByte(c.token, 0) >= 0:
		return invalid("token contains a NUL byte")
	case c.guard < 0:
		return invalid("restart guard maximum TTL must be positive")
	case c.guard > 0 && c.ttl > c.guard:
		return invalid("TTL %v is above the restart guard's maximum TTL %v", c.ttl, c.guard)
	}
	if drift := clock.Drift(c.ttl, c.driftFactor); c.ttl <= drift {
		return invalid("TTL %v is not above the clock drift %v", c.ttl, drift)
	} else if c.nodeTimeout >= c.ttl-drift {
		return invalid("node timeout %v leaves no validity within TTL %v (drift %v)", c.nodeTimeout, c.ttl, drift)
	}
	return validateStrategy(c.retry)
}
