package doctor

import (
	"fmt"
	"time"

	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/internal/settings"
)

// DefaultClockWindow is how long Check measures the servers' clock rates
// over, unless WithClockWindow says otherwise.
const DefaultClockWindow = 3 * time.Second

// Option configures one Check: what the nodes are judged against (the
// settings the locks use) and how long the clocks are watched.
type Option func(*config)

type config struct {
	ttl         time.Duration
	driftFactor float64
	nodeTimeout time.Duration
	guard       time.Duration // the restart guard's maximum TTL; 0: off
	window      time.Duration
}

func defaultConfig() config {
	return config{
		ttl:         redlock.DefaultTTL,
		driftFactor: redlock.DefaultDriftFactor,
		nodeTimeout: redlock.DefaultNodeTimeout,
		window:      DefaultClockWindow,
	}
}

// WithTTL sets the TTL the locks use: a clock that differs from this
// machine's or another server's by more than its drift allowance (TTL ×
// drift factor + 2ms) is a warning. It must be positive and above the
// drift allowance. Default redlock.DefaultTTL.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithDriftFactor sets the drift factor the locks use (redlock's
// WithDriftFactor): the share of the TTL the clocks may differ by, and the
// rate difference they may have. It must be in [0, 1). Default
// redlock.DefaultDriftFactor.
func WithDriftFactor(f float64) Option { return func(c *config) { c.driftFactor = f } }

// WithNodeTimeout sets the node timeout the locks use: a node whose
// slowest round trip is above half of it is a warning. It also bounds each
// dial, with its TLS handshake; every other call to a node is bounded by
// it or a second, whichever is longer, so that a slow node is reported as
// slow, not as unreachable. It must be positive and below the TTL minus
// the drift allowance. Default redlock.DefaultNodeTimeout.
func WithNodeTimeout(d time.Duration) Option { return func(c *config) { c.nodeTimeout = d } }

// WithRestartGuard says that the locks use the restart guard with this
// maximum TTL (redlock's WithRestartGuard): the guard's findings then
// count even on a fresh cluster, where no node has its marker yet, and
// each node must run Redis 7.0 or later. 0 leaves it off; the guard's
// findings still count when some node has a marker. A negative maxTTL, or
// one below the TTL, makes Check fail with an error matching
// redlock.ErrInvalid. Default 0 (off).
func WithRestartGuard(maxTTL time.Duration) Option { return func(c *config) { c.guard = maxTTL } }

// WithClockWindow sets how long Check measures the servers' clock rates
// over: it reads every server's clock at the start and again once d has
// passed. A longer window sees smaller rate differences, since the round
// trips' uncertainty is spread over it. 0 measures the clocks' offsets
// only; it must not be negative. Default DefaultClockWindow.
func WithClockWindow(d time.Duration) Option { return func(c *config) { c.window = d } }

// validate checks the settings with the lock core's own rules, and the
// clock window.
func (c *config) validate() error {
	if err := settings.Timing(c.ttl, c.driftFactor, c.nodeTimeout, c.guard); err != nil {
		return invalid("%v", err)
	}
	if c.window < 0 {
		return invalid("clock window %v must not be negative", c.window)
	}
	return nil
}

// invalid is an error matching redlock.ErrInvalid, worded as redlock's.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{redlock.ErrInvalid}, args...)...)
}
