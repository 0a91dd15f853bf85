package main

import (
	"testing"
	"time"
)

// SIGKILL comes --grace after SIGTERM, but half the warning lead before the
// validity ends at the latest, unless --unsafe-grace; the watchdog's
// deadline is a quarter of the lead before it.
func TestKillPolicy(t *testing.T) {
	t.Parallel()
	until := time.Unix(1000, 0)
	// run's defaults: lead = 500ms + 30s/20 = 2s.
	lead := 2 * time.Second
	term := until.Add(-lead)
	for _, tt := range []struct {
		name     string
		grace    time.Duration
		unsafe   bool
		kill     time.Time
		watchdog time.Time
	}{
		{"short grace", 300 * time.Millisecond, false, term.Add(300 * time.Millisecond), until.Add(-lead / 4)},
		{"long grace is bounded", 10 * time.Second, false, until.Add(-lead / 2), until.Add(-lead / 4)},
		{"zero grace", 0, false, term, until.Add(-lead / 4)},
		{"unsafe grace", 10 * time.Second, true, term.Add(10 * time.Second), term.Add(10*time.Second + lead/4)},
		{"unsafe but short grace", 300 * time.Millisecond, true, term.Add(300 * time.Millisecond), until.Add(-lead / 4)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newKillPolicy(30*time.Second, 500*time.Millisecond, tt.grace, tt.unsafe)
			if p.lead != lead {
				t.Fatalf("lead %v, want %v", p.lead, lead)
			}
			if got := p.killTime(term, until); !got.Equal(tt.kill) {
				t.Errorf("SIGKILL %v before the validity ends, want %v", until.Sub(got), until.Sub(tt.kill))
			}
			if got := p.watchdogDeadline(until); !got.Equal(tt.watchdog) {
				t.Errorf("watchdog %v before the validity ends, want %v", until.Sub(got), until.Sub(tt.watchdog))
			}
		})
	}
}
