package checker_test

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/integration/checker"
)

// TestHiddenFences checks that a hold whose fence the client could not see
// (Do) stays out of the fence order, while a missing fence still counts.
func TestHiddenFences(t *testing.T) {
	hidden := hold(2, "k", "b", 200, 300)
	hidden.FenceHidden = true
	tests := []struct {
		name     string
		holds    []checker.Hold
		outOfOrd int
	}{
		{"hidden", []checker.Hold{fenced(hold(1, "k", "a", 0, 100), 2), hidden, fenced(hold(3, "k", "c", 400, 500), 3)}, 0},
		{"missing", []checker.Hold{fenced(hold(1, "k", "a", 0, 100), 2), hold(2, "k", "b", 200, 300), fenced(hold(3, "k", "c", 400, 500), 3)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checker.Check(history(tt.holds...))
			if len(r.Fencing.OutOfOrder) != tt.outOfOrd {
				t.Errorf("%d out of order, want %d\n%s", len(r.Fencing.OutOfOrder), tt.outOfOrd, r.String())
			}
		})
	}
}

// TestAnomaliesReported checks that anomalies reach the report.
func TestAnomaliesReported(t *testing.T) {
	h := history(hold(1, "k", "a", 0, 100))
	h.AddAnomaly(checker.Anomaly{Kind: "held-after-panic", Client: 1, Key: "k", At: at(50), Detail: "3 nodes"})
	r := checker.Check(h)
	if len(r.Anomalies) != 1 || !strings.Contains(r.String(), "ANOMALY held-after-panic") {
		t.Errorf("anomalies %v, report:\n%s", r.Anomalies, r.String())
	}
}
