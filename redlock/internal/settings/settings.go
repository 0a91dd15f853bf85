// Package settings checks the timing settings that the lock core and the
// deployment checker share, so that both refuse the same values with the
// same words.
package settings

import (
	"fmt"
	"math"
	"time"

	"github.com/quorumlock/redlock/clock"
)

// Timing checks a lock's TTL, drift factor, node timeout and restart guard
// maximum TTL (0: off): nil when a lock can hold with them, else what is
// wrong, for the caller to wrap in its own ErrInvalid.
func Timing(ttl time.Duration, driftFactor float64, nodeTimeout, guard time.Duration) error {
	switch {
	case ttl <= 0:
		return fmt.Errorf("TTL %v must be positive", ttl)
	case math.IsNaN(driftFactor) || driftFactor < 0 || driftFactor >= 1:
		return fmt.Errorf("drift factor %v must be in [0, 1)", driftFactor)
	case nodeTimeout <= 0:
		return fmt.Errorf("node timeout %v must be positive", nodeTimeout)
	case guard < 0:
		return fmt.Errorf("restart guard maximum TTL %v must not be negative", guard)
	case guard > 0 && ttl > guard:
		return fmt.Errorf("TTL %v is above the restart guard's maximum TTL %v", ttl, guard)
	}
	if drift := clock.Drift(ttl, driftFactor); ttl <= drift {
		return fmt.Errorf("TTL %v is not above the clock drift %v", ttl, drift)
	} else if nodeTimeout >= ttl-drift {
		return fmt.Errorf("node timeout %v leaves no validity within TTL %v (drift %v)", nodeTimeout, ttl, drift)
	}
	return nil
}
