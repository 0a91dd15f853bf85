package settings_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/redlock/internal/settings"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Each rule refuses its bad value with its reason, and good settings pass.
func TestTiming(t *testing.T) {
	s := time.Second
	if err := settings.Timing(8*s, 0.01, 50*time.Millisecond, 0); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, tc := range []struct {
		ttl     time.Duration
		drift   float64
		timeout time.Duration
		guard   time.Duration
		want    string
	}{
		{0, 0.01, s, 0, "TTL 0s must be positive"},
		{8 * s, math.NaN(), s, 0, "drift factor"},
		{8 * s, 1, s, 0, "drift factor 1"},
		{8 * s, 0.01, 0, 0, "node timeout 0s must be positive"},
		{8 * s, 0.01, s, -s, "must not be negative"},
		{8 * s, 0.01, s, 4 * s, "above the restart guard's maximum TTL"},
		{2 * time.Millisecond, 0.01, time.Millisecond, 0, "not above the clock drift"},
		{s, 0.01, s, 0, "leaves no validity"},
	} {
		if err := settings.Timing(tc.ttl, tc.drift, tc.timeout, tc.guard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Timing(%v, %v, %v, %v) = %v, want %q", tc.ttl, tc.drift, tc.timeout, tc.guard, err, tc.want)
		}
	}
}
