package chaos

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
	"github.com/quorumlock/redlock/internal/redistest"
)

// anomalies is a recorder that keeps only anomalies.
type anomalies struct {
	mu  sync.Mutex
	got []checker.Anomaly
}

func (a *anomalies) AddHold(checker.Hold)                {}
func (a *anomalies) AddFailure(string, error, time.Time) {}
func (a *anomalies) AddAnomaly(x checker.Anomaly) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, x)
}

// TestCounterWatch writes a counter on a real server as the library's
// scripts do (from Lua, which MONITOR shows as such) and directly: the
// watch reports the one write that takes it back, and nothing else.
func TestCounterWatch(t *testing.T) {
	srv := redistest.StartT(t, 1, redistest.Options{})[0]
	rec := &anomalies{}
	cw, err := watchCounters([]string{srv.Addr}, rec)
	if err != nil {
		t.Fatal(err)
	}
	c := srv.NewClient()
	t.Cleanup(func() { _ = c.Close() })
	const set = "return redis.call('SET', KEYS[1], ARGV[1], 'PX', 60000)"
	counter := counterPrefix + "k"
	steps := []func() error{
		func() error { return c.Eval(t.Context(), set, []string{counter}, 10).Err() },
		func() error { return c.Incr(t.Context(), counter).Err() },                    // 11
		func() error { return c.Eval(t.Context(), set, []string{counter}, 11).Err() }, // the same: not back
		func() error { return c.Eval(t.Context(), set, []string{counter}, 7).Err() },  // back
		func() error { return c.Del(t.Context(), counter).Err() },                     // unknown from here
		func() error { return c.Eval(t.Context(), set, []string{counter}, 3).Err() },
		func() error { return c.Set(t.Context(), "k", "not a counter", 0).Err() },
		func() error { return c.Set(t.Context(), counter, 2, 0).Err() }, // back, written directly
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if err := cw.close(); err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, a := range rec.got {
		if a.Kind != "counter-went-back" || a.Key != "k" {
			t.Errorf("anomaly %+v, want counter-went-back on key k", a)
		}
		details = append(details, a.Detail)
	}
	if len(details) != 2 || !containsAll(details[0], "from 11 to 7", "lua") || !containsAll(details[1], "from 3 to 2") {
		t.Fatalf("anomalies %q, want the counter going from 11 to 7 (from Lua), then from 3 to 2", details)
	}
}

// TestMonitorArgs reads MONITOR lines as Redis 7 writes them.
func TestMonitorArgs(t *testing.T) {
	for _, tt := range []struct {
		line string
		want []string
	}{
		{`+1764000000.123456 [0 lua] "SET" "redlock:fence:k" "1795" "PX" "604800500"` + "\r\n", []string{"SET", "redlock:fence:k", "1795", "PX", "604800500"}},
		{`+1764000000.123456 [0 127.0.0.1:5000] "set" "a \"quoted\" \\ key" "1"` + "\r\n", []string{"set", `a "quoted" \ key`, "1"}},
		{"+OK\r\n", nil},
		{"-ERR something\r\n", nil},
	} {
		if got := monitorArgs(tt.line); !slices.Equal(got, tt.want) {
			t.Errorf("monitorArgs(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
