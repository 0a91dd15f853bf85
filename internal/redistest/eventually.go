package redistest

import (
	"context"
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

// BoundedCtx is t.Context() cut after 30s, for a call that waits or
// retries until it succeeds: if it never does, the test fails there
// instead of hanging until the binary's timeout.
func BoundedCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
