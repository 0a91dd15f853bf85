package redlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// logRecords is a slog.Handler that keeps every record, for a test to
// await and read.
type logRecords struct {
	mu    sync.Mutex
	all   []slog.Record
	added chan struct{} // closed and replaced on every record
}

func newLogRecords() *logRecords { return &logRecords{added: make(chan struct{})} }

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.all = append(h.all, r.Clone())
	close(h.added)
	h.added = make(chan struct{})
	return nil
}

// attrs returns a record's attributes as strings.
func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// len returns how many records there are.
func (h *logRecords) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.all)
}

// count returns how many records have message msg.
func (h *logRecords) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.all {
		if r.Message == msg {
			n++
		}
	}
	return n
}

// await waits for a record with message msg and attribute node = node
// (any node if ""), while poke (if set) makes calls that may bring it; it
// returns the record's attributes.
func (h *logRecords) await(t *testing.T, msg, node string, poke func()) map[string]string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for i := 0; ; {
		h.mu.Lock()
		for ; i < len(h.all); i++ {
			r := h.all[i]
			if a := attrs(r); r.Message == msg && (node == "" || a["node"] == node) {
				h.mu.Unlock()
				if r.Level != slog.LevelWarn {
					t.Errorf("%q logged at %v, want Warn", msg, r.Level)
				}
				return a
			}
		}
		added := h.added
		h.mu.Unlock()
		if poke != nil {
			poke()
		}
		select {
		case <-added:
		case <-deadline:
			t.Fatalf("no log line %q for node %q within 10s", msg, node)
		case <-time.After(20 * time.Millisecond): // poke again
		}
	}
}

// Every change of a node's state reaches the logger at Warn, once, with
// how many more failures the locks survive; Health says the same.
func TestNodeStatesLogged(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	logs := newLogRecords()
	l := c.locker(t, redlock.WithLogger(slog.New(logs)))
	obtain := func() {
		if lock, err := l.TryObtain(t.Context(), "k"); err == nil {
			_ = lock.Release(t.Context())
		}
	}
	// A round is decided by a majority: the third answer may come after
	// it. Nothing is logged for a node's first answer when it works.
	for deadline := time.Now().Add(10 * time.Second); l.Health().Nodes[2].State != redlock.NodeUp; {
		if time.Now().After(deadline) {
			t.Fatalf("Health of three answering nodes: %+v, want all up", l.Health())
		}
		obtain()
	}
	if h := l.Health(); h.Spare != 1 {
		t.Fatalf("Health of three answering nodes: %+v, want spare 1", h)
	}
	if n := logs.len(); n != 0 {
		t.Errorf("%d log lines for three nodes that work, want none", n)
	}
	if err := c.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	a := logs.await(t, "redlock: node down", c.servers[2].Addr, obtain)
	if a["spare"] != "0" || a["was"] != "up" || a["err"] == "" {
		t.Errorf("node down logged with %v, want spare 0, was up and the error", a)
	}
	if h := l.Health(); h.Spare != 0 || h.Nodes[2].State != redlock.NodeDown || h.Nodes[2].Err == nil {
		t.Errorf("Health with node 2 down: %+v", h)
	}
	obtain()
	obtain()
	if n := logs.count("redlock: node down"); n != 1 {
		t.Errorf("node down logged %d times, want once per change", n)
	}
	if err := c.servers[2].Restart(); err != nil {
		t.Fatal(err)
	}
	if a := logs.await(t, "redlock: node back", c.servers[2].Addr, obtain); a["was"] != "down" || a["spare"] != "1" {
		t.Errorf("node back logged with %v, want was down, spare 1", a)
	}

	// A replica.
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.clients[1].ReplicaOf(t.Context(), "127.0.0.1", strconv.Itoa(port)).Err(); err != nil {
		t.Fatal(err)
	}
	logs.await(t, "redlock: node replica", c.servers[1].Addr, obtain)
	if err := c.clients[1].ReplicaOf(t.Context(), "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
	logs.await(t, "redlock: node back", c.servers[1].Addr, obtain)
}

// A node refused for good, one that abstains under the restart guard and
// one that reaches the same server as another are logged as such.
func TestNodeMistakesLogged(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	bad := redis.NewClient(&redis.Options{Addr: c.servers[2].Addr, DB: 99, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	t.Cleanup(func() { _ = bad.Close() })
	same := redistest.ForwardT(t, c.servers[0].Addr).ClientT(t)
	for _, tc := range []struct {
		name    string
		clients []*redis.Client
		opts    []redlock.Option
		msg     string
		node    string
	}{
		{"database out of range", []*redis.Client{c.clients[0], c.clients[1], bad}, nil, "redlock: node misconfigured", c.servers[2].Addr},
		{"same server", []*redis.Client{c.clients[0], c.clients[1], same}, nil, "redlock: node same server as another node", ""},
		{"not bootstrapped", c.clients, []redlock.Option{redlock.WithRestartGuard(time.Minute)}, "redlock: node abstaining", c.servers[0].Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := newLogRecords()
			l := newLocker(t, tc.clients, append(tc.opts, redlock.WithLogger(slog.New(logs)))...)
			logs.await(t, tc.msg, tc.node, func() {
				if lock, err := l.TryObtain(t.Context(), "k-"+tc.name); err == nil {
					_ = lock.Release(t.Context())
				}
			})
		})
	}
}

// An Obtain that waits out an outage says so once it has waited the
// bound, and again every bound while it lasts, not at every attempt.
func TestOutageWaitLogged(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	logs := newLogRecords()
	l := c.locker(t, redlock.WithLogger(slog.New(logs)), redlock.WithOutageLog(200*time.Millisecond),
		redlock.WithRetry(redlock.LinearBackoff(5*time.Millisecond)))
	for _, s := range c.servers[1:] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	begin := time.Now()
	_, err := l.Obtain(ctx, "waits")
	waited := time.Since(begin)
	if !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("Obtain with two of three nodes down: %v, want ErrNoQuorum", err)
	}
	n := logs.count("redlock: waiting out an outage")
	// One a bound after the first failure, at most: the attempts were
	// many more (every 5ms).
	if n < 1 || n > int(waited/(200*time.Millisecond)) {
		t.Errorf("%d outage lines in %v of waiting with a bound of 200ms, want 1 to %d", n, waited, int(waited/(200*time.Millisecond)))
	}
	if a := logs.await(t, "redlock: waiting out an outage", "", nil); a["key"] != `"waits"` || a["waited"] == "" || a["err"] == "" {
		t.Errorf("outage line %v, want the key, the time waited and the error", a)
	}
}

// WithLogger(nil) is a mistake, not a silent default.
func TestWithLoggerNil(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	if _, err := redlock.New(c.clients, redlock.WithLogger(nil)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("New with a nil logger: %v, want ErrInvalid", err)
	}
}
