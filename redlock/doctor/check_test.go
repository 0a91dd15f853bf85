package doctor_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/doctor"
)

// checkWindow keeps the tests' clock windows short; the fast clock's rate
// difference is far beyond what a short window can miss.
const checkWindow = 500 * time.Millisecond

// judged are the settings the tests' checks judge against: those of the
// tests' Lockers (testOpts).
var judged = []doctor.Option{doctor.WithNodeTimeout(time.Second), doctor.WithTTL(10 * time.Second)}

// check runs Check over clients with judged, the clock window given (or
// checkWindow) and opts, and fails the test on an error.
func check(t *testing.T, clients []*redis.Client, opts ...doctor.Option) *doctor.Report {
	t.Helper()
	opts = append(append(append([]doctor.Option{}, judged...), doctor.WithClockWindow(checkWindow)), opts...)
	rep, err := doctor.Check(t.Context(), clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// finding returns the finding of check about node ("" for the whole set)
// whose summary contains want, failing the test with the whole report when
// there is none.
func finding(t *testing.T, rep *doctor.Report, check, node, want string) doctor.Finding {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Check == check && f.Node == node && strings.Contains(f.Summary, want) {
			return f
		}
	}
	t.Fatalf("no %s finding on %q containing %q in:\n%s", check, node, want, dump(rep))
	return doctor.Finding{}
}

func dump(rep *doctor.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString(f.Severity.String() + " " + f.Check + " " + f.Where() + ": " + f.Summary)
		if f.Fix != "" {
			b.WriteString(" [fix: " + f.Fix + "]")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestCheckHealthy(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{Persistent: true})
	clients := redistest.ClientsT(t, servers)
	rep := check(t, clients)
	if rep.Severity() != doctor.OK || len(rep.Problems()) != 0 || len(rep.Unreachable()) != 0 {
		t.Errorf("severity %v, want ok:\n%s", rep.Severity(), dump(rep))
	}
	for i, n := range rep.Nodes {
		if n.Addr != servers[i].Addr || n.Err != nil || n.RunID == "" || n.Role != "master" || n.AppendFsync != "always" ||
			n.MaxMemoryPolicy != "noeviction" || n.ClockRate == 0 || n.Latency <= 0 || !n.Guard.Known || n.Guard.Marker {
			t.Errorf("node %d: %+v", i, n)
		}
	}
	finding(t, rep, doctor.Nodes, "", "3 nodes, quorum 2")
	// Check uses connections of its own, not the callers' clients.
	for i, c := range clients {
		if st := c.PoolStats(); st.TotalConns != 0 || st.Misses != 0 {
			t.Errorf("client %d was used: %+v", i, st)
		}
	}
	// Check leaves no key of its own behind.
	for _, c := range redistest.ClientsT(t, servers) {
		if keys, err := c.Keys(t.Context(), "*").Result(); err != nil || len(keys) != 0 {
			t.Errorf("keys left: %q, %v", keys, err)
		}
	}
}

// A second address of a server is reported as an error, also after the
// lock refused it: Check asks the nodes directly.
func TestCheckDuplicateServer(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{Persistent: true})
	alias := redistest.ForwardT(t, servers[0].Addr)
	clients := append(redistest.ClientsT(t, servers[:2]), alias.ClientT(t))
	l := newLocker(t, clients)
	if _, err := l.Inspect(t.Context(), "dup"); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Inspect with an alias: %v, want ErrInvalid", err)
	}
	rep := check(t, clients, doctor.WithClockWindow(0))
	f := finding(t, rep, doctor.Identity, alias.Addr, "same server as "+servers[0].Addr)
	if f.Severity != doctor.Error || rep.Severity() != doctor.Error || f.Fix == "" {
		t.Errorf("finding %+v, report severity %v", f, rep.Severity())
	}
	if rep.Nodes[2].ClockRate != 0 {
		t.Errorf("clock rate measured without a window: %v", rep.Nodes[2].ClockRate)
	}
}

// Bad input is an error matching ErrInvalid, on one line, before any node
// is asked.
func TestCheckInvalid(t *testing.T) {
	t.Parallel()
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	other := redis.NewClient(&redis.Options{Addr: "localhost" + c.Options().Addr[strings.LastIndexByte(c.Options().Addr, ':'):]})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:2"}})
	t.Cleanup(func() { _, _ = other.Close(), failover.Close() })
	for _, tt := range []struct {
		name    string
		clients []*redis.Client
		opts    []doctor.Option
		want    string
	}{
		{"no clients", nil, nil, "no clients"},
		{"nil client", []*redis.Client{c, nil}, nil, "client 1 is nil"},
		{"same client", []*redis.Client{c, c}, nil, "nodes 0 and 1 are the same node"},
		{"same address", []*redis.Client{c, other}, nil, "nodes 0 and 1 are the same node"},
		{"failover client", []*redis.Client{c, failover}, nil, "node 1 is a Sentinel failover client"},
		{"negative window", []*redis.Client{c}, []doctor.Option{doctor.WithClockWindow(-time.Second)}, "clock window -1s"},
		{"zero TTL", []*redis.Client{c}, []doctor.Option{doctor.WithTTL(0)}, "TTL 0s must be positive"},
		{"drift factor", []*redis.Client{c}, []doctor.Option{doctor.WithDriftFactor(1)}, "drift factor 1 must be in [0, 1)"},
		{"zero node timeout", []*redis.Client{c}, []doctor.Option{doctor.WithNodeTimeout(0)}, "node timeout 0s must be positive"},
		{"node timeout above the TTL", []*redis.Client{c}, []doctor.Option{doctor.WithTTL(time.Second), doctor.WithNodeTimeout(time.Second)}, "leaves no validity"},
		{"negative guard", []*redis.Client{c}, []doctor.Option{doctor.WithRestartGuard(-time.Second)}, "restart guard"},
		{"guard below the TTL", []*redis.Client{c}, []doctor.Option{doctor.WithTTL(time.Minute), doctor.WithRestartGuard(time.Second)}, "above the restart guard's maximum TTL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := doctor.Check(t.Context(), tt.clients, tt.opts...)
			if !errors.Is(err, redlock.ErrInvalid) || rep != nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Check: %v, report %v; want ErrInvalid saying %q", err, rep != nil, tt.want)
			}
		})
	}
	if st := c.PoolStats(); st.TotalConns != 0 {
		t.Errorf("a bad call used the client: %+v", st)
	}
}

// A context that ends during the clock window cuts the check short: the
// report holds what was found.
func TestCheckCutShort(t *testing.T) {
	t.Parallel()
	clients := redistest.ClientsT(t, redistest.StartT(t, 3, redistest.Options{}))
	// Three seconds leave the checks before the window room on a loaded
	// machine; the window lasts a minute.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	rep, err := doctor.Check(ctx, clients, append(judged, doctor.WithClockWindow(time.Minute))...)
	if !errors.Is(err, context.DeadlineExceeded) || rep == nil {
		t.Fatalf("Check cut short: %v, report %v", err, rep != nil)
	}
	if rep.Nodes[0].RunID == "" || rep.Nodes[0].ClockRate != 0 {
		t.Errorf("report of a check cut short: %+v", rep.Nodes[0])
	}
	for _, f := range rep.Findings {
		if f.Unverified {
			t.Errorf("a check cut short in the clock window reports %s as not verified: %s", f.Check, f.Summary)
		}
	}
}

// A node nobody listens on is a finding, not an error.
func TestCheckUnreachable(t *testing.T) {
	t.Parallel()
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	clients := redistest.ClientsT(t, redistest.StartT(t, 2, redistest.Options{Persistent: true}))
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	t.Cleanup(func() { _ = dead.Close() })
	rep := check(t, append(clients, dead), doctor.WithClockWindow(0))
	f := finding(t, rep, doctor.Reach, dead.Options().Addr, "unreachable")
	if f.Severity != doctor.Error || f.Fix == "" || !reflect.DeepEqual(rep.Unreachable(), []string{dead.Options().Addr}) {
		t.Errorf("finding %+v, unreachable %q", f, rep.Unreachable())
	}
	finding(t, rep, doctor.Persistence, clients[0].Options().Addr, "restarts keep locks")
}

// The restart guard's state: a fresh cluster needs Bootstrap; a node that
// restarted has a stale marker, then abstains.
func TestCheckGuard(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{Persistent: true})
	clients := redistest.ClientsT(t, servers)
	l := newLocker(t, clients, redlock.WithRestartGuard(time.Minute))
	checkGuard := func() *doctor.Report {
		t.Helper()
		return check(t, clients, doctor.WithClockWindow(0), doctor.WithRestartGuard(time.Minute))
	}
	rep := checkGuard()
	if !rep.GuardInUse || !rep.Nodes[1].Guard.BootstrapNeeded || rep.Severity() != doctor.Warning {
		t.Errorf("fresh cluster: %+v\n%s", rep.Nodes[1].Guard, dump(rep))
	}
	finding(t, rep, doctor.Guard, servers[1].Addr, "bootstrap needed")
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	rep = checkGuard()
	if rep.Severity() != doctor.OK {
		t.Errorf("after Bootstrap:\n%s", dump(rep))
	}
	if err := servers[1].Restart(); err != nil {
		t.Fatal(err)
	}
	rep = checkGuard()
	if g := rep.Nodes[1].Guard; !g.Marker || g.Current || g.Abstain != 0 {
		t.Errorf("restarted node: %+v", g)
	}
	finding(t, rep, doctor.Guard, servers[1].Addr, "marker stale")
	// A locker of the restarted node alone: its attempt returns only once
	// that node has answered (a majority of three may not wait for it).
	one := newLocker(t, clients[1:2], redlock.WithRestartGuard(time.Minute))
	_, err := one.TryObtain(t.Context(), "guarded")
	if qe := (*redlock.QuorumError)(nil); !errors.As(err, &qe) || !errors.Is(qe.Nodes[0].Err, redlock.ErrAbstained) {
		t.Fatalf("the restarted node's first guarded acquisition: %v, want it to abstain", err)
	}
	rep = checkGuard()
	// The quarantine lasts the guard's maximum TTL and two fence windows
	// (200ms, see acquire.lua).
	if g := rep.Nodes[1].Guard; !g.Current || g.Abstain <= 0 || g.Abstain > time.Minute+200*time.Millisecond {
		t.Errorf("abstaining node: %+v", g)
	}
	finding(t, rep, doctor.Guard, servers[1].Addr, "abstains for")
}

// go-redis writes a client's failed dials to the process's logger; Check
// dials an unreachable node itself, so no such line is written about it.
// Not parallel: it sets the process's go-redis logger.
func TestCheckLogsNothing(t *testing.T) {
	logged := &captureLogger{}
	redis.SetLogger(logged)
	t.Cleanup(func() { redis.SetLogger(redistest.QuietLogger{}) })
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = dead.Close() })
	rep := check(t, []*redis.Client{dead}, doctor.WithClockWindow(0))
	if len(rep.Unreachable()) != 1 {
		t.Fatalf("unreachable: %q", rep.Unreachable())
	}
	if lines := logged.lines(); len(lines) != 0 {
		t.Errorf("go-redis logged: %q", lines)
	}
	// The same client's own dial is logged: the logger would have seen it.
	if err := dead.Ping(t.Context()).Err(); err == nil {
		t.Fatal("Ping of a dead node succeeded")
	}
	if len(logged.lines()) == 0 {
		t.Error("a plain client's failed dial was not logged either")
	}
}

// captureLogger keeps go-redis's log lines.
type captureLogger struct {
	mu  sync.Mutex
	got []string
}

func (l *captureLogger) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, fmt.Sprintf(format, v...))
}

func (l *captureLogger) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// Check refuses two clients of one address exactly where redlock.New
// does: the same spellings of one node count as one.
func TestCheckSameNodeAsNew(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, redistest.Options{})
	port := func(s *redistest.Server) string { return s.Addr[strings.LastIndexByte(s.Addr, ':'):] }
	p, q := port(servers[0]), port(servers[1])
	for _, pair := range [][2]string{
		{"127.0.0.1" + p, "127.0.0.1" + p},
		{"127.0.0.1" + p, "localhost" + p},
		{"LOCALHOST" + p, "[::1]" + p},
		{"127.0.0.1" + p, "127.0.0.1" + q},
		{"localhost" + p, "127.0.0.1" + q},
	} {
		clients := make([]*redis.Client, 2)
		for i, addr := range pair {
			clients[i] = redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { _ = clients[i].Close() })
		}
		l, errNew := redlock.New(clients)
		if errNew == nil {
			_ = l.Close()
		}
		_, errCheck := doctor.Check(t.Context(), clients, doctor.WithClockWindow(0))
		if errors.Is(errNew, redlock.ErrInvalid) != errors.Is(errCheck, redlock.ErrInvalid) {
			t.Errorf("%q: New %v, Check %v", pair, errNew, errCheck)
		}
	}
}
