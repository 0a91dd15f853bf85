package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// checkWindow keeps the tests' clock windows short; the fast clock's rate
// difference is far beyond what a short window can miss.
const checkWindow = 500 * time.Millisecond

// check runs Check over clients and fails the test on an error.
func check(t *testing.T, clients []*redis.Client, opts ...redlock.Option) *redlock.Report {
	t.Helper()
	l := newLocker(t, clients, opts...)
	rep, err := l.Check(t.Context(), redlock.WithClockWindow(checkWindow))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// finding returns the finding of check about node ("" for the whole set)
// whose summary contains want, failing the test with the whole report when
// there is none.
func finding(t *testing.T, rep *redlock.Report, check, node, want string) redlock.Finding {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Check == check && f.Node == node && strings.Contains(f.Summary, want) {
			return f
		}
	}
	t.Fatalf("no %s finding on %q containing %q in:\n%s", check, node, want, dump(rep))
	return redlock.Finding{}
}

func dump(rep *redlock.Report) string {
	var b strings.Builder
	for _, f := range rep.Findings {
		b.WriteString(f.Severity.String() + " " + f.Check + " " + f.Node + ": " + f.Summary)
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
	rep := check(t, redistest.ClientsT(t, servers))
	if rep.Severity() != redlock.SeverityOK || len(rep.Problems()) != 0 || len(rep.Unreachable()) != 0 {
		t.Errorf("severity %v, want ok:\n%s", rep.Severity(), dump(rep))
	}
	for i, n := range rep.Nodes {
		if n.Addr != servers[i].Addr || n.Err != nil || n.RunID == "" || n.Role != "master" || n.AppendFsync != "always" ||
			n.MaxMemoryPolicy != "noeviction" || n.ClockRate == 0 || n.Latency <= 0 || !n.Guard.Known || n.Guard.Marker {
			t.Errorf("node %d: %+v", i, n)
		}
	}
	finding(t, rep, redlock.CheckNodes, "", "3 nodes, quorum 2")
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
	alias, err := redistest.Forward(servers[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alias.Close() })
	clients := redistest.ClientsT(t, servers[:2])
	ac := alias.NewClient()
	t.Cleanup(func() { _ = ac.Close() })
	l := newLocker(t, append(clients, ac))
	if _, err := l.Inspect(t.Context(), "dup"); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Inspect with an alias: %v, want ErrInvalid", err)
	}
	rep, err := l.Check(t.Context(), redlock.WithClockWindow(0))
	if err != nil {
		t.Fatal(err)
	}
	f := finding(t, rep, redlock.CheckIdentity, alias.Addr, "same server as "+servers[0].Addr)
	if f.Severity != redlock.SeverityError || rep.Severity() != redlock.SeverityError || f.Fix == "" {
		t.Errorf("finding %+v, report severity %v", f, rep.Severity())
	}
	if rep.Nodes[2].ClockRate != 0 {
		t.Errorf("clock rate measured without a window: %v", rep.Nodes[2].ClockRate)
	}
}

func TestCheckErrors(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3)
	l := c.locker(t)
	if _, err := l.Check(t.Context(), redlock.WithClockWindow(-time.Second)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("negative window: %v, want ErrInvalid", err)
	}

	// A context that ends during the clock window cuts the check short:
	// the report holds what was found. Three seconds leave the checks
	// before the window room on a loaded machine; the window lasts a minute.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	rep, err := l.Check(ctx, redlock.WithClockWindow(time.Minute))
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

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Check(t.Context()); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// The restart guard's state: a fresh cluster needs Bootstrap; a node that
// restarted has a stale marker, then abstains.
func TestCheckGuard(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{Persistent: true})
	l := newLocker(t, redistest.ClientsT(t, servers), redlock.WithRestartGuard(time.Minute))
	check := func() *redlock.Report {
		t.Helper()
		rep, err := l.Check(t.Context(), redlock.WithClockWindow(0))
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := check()
	if !rep.GuardInUse || !rep.Nodes[1].Guard.BootstrapNeeded || rep.Severity() != redlock.SeverityWarning {
		t.Errorf("fresh cluster: %+v\n%s", rep.Nodes[1].Guard, dump(rep))
	}
	finding(t, rep, redlock.CheckGuard, servers[1].Addr, "bootstrap needed")
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	rep = check()
	if rep.Severity() != redlock.SeverityOK {
		t.Errorf("after Bootstrap:\n%s", dump(rep))
	}
	if err := servers[1].Restart(); err != nil {
		t.Fatal(err)
	}
	rep = check()
	if g := rep.Nodes[1].Guard; !g.Marker || g.Current || g.Abstain != 0 {
		t.Errorf("restarted node: %+v", g)
	}
	finding(t, rep, redlock.CheckGuard, servers[1].Addr, "marker stale")
	mustObtain(t, l, "guarded")
	rep = check()
	// The quarantine lasts the guard's maximum TTL and one fence window
	// (100ms, see acquire.lua).
	if g := rep.Nodes[1].Guard; !g.Current || g.Abstain <= 0 || g.Abstain > time.Minute+100*time.Millisecond {
		t.Errorf("abstaining node: %+v", g)
	}
	finding(t, rep, redlock.CheckGuard, servers[1].Addr, "abstains for")
}
