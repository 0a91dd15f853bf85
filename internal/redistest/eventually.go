package redistest

import (
	"testing"
	"time"
)

// Eventually calls cond every 10ms until it returns nil or within has
// passed, and returns its last error (nil once it held). It stops early,
// with cond's last error, when the test's context ends.
func Eventually(t testing.TB, within time.Duration, cond func() error) error {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-t.Context().Done():
			return err
		case <-tick.C:
		}
	}
}
