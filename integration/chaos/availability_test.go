package chaos_test

import (
	"testing"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
)

// TestAvailabilityLine checks the availability line of a run's report: the
// share of each kind, its rates, the time its faults were active, and the
// faults on a majority apart, after the others.
func TestAvailabilityLine(t *testing.T) {
	during := map[string]checker.Rate{
		"kill":                             {Acquisitions: 900, Time: 1500 * time.Millisecond},
		"isolate":                          {Acquisitions: 100, Time: 240 * time.Millisecond},
		"restart" + checker.MajoritySuffix: {Acquisitions: 10, Time: time.Second},
	}
	before := map[string]checker.Rate{
		"kill":                             {Acquisitions: 1000, Time: time.Second},
		"isolate":                          {Acquisitions: 500, Time: time.Second},
		"restart" + checker.MajoritySuffix: {Acquisitions: 1000, Time: time.Second},
	}
	got := availability(during, before)
	want := "isolate=83% (417/s vs 500/s over 200ms) kill=60% (600/s vs 1000/s over 1.5s); on a majority: restart" +
		checker.MajoritySuffix + "=1% (10/s vs 1000/s over 1s)"
	if got != want {
		t.Errorf("availability line:\n got %s\nwant %s", got, want)
	}
	if got := availability(nil, nil); got != "no faults" {
		t.Errorf("availability line without faults: %q, want %q", got, "no faults")
	}
}
