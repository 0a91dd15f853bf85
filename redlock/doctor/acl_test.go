package doctor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/doctor"
)

// A user given exactly redlock.ACLRule passes every check, on nodes that
// carry the restart guard's markers, without a single refusal.
func TestCheckUnderACLRule(t *testing.T) {
	servers := redistest.StartACLT(t, 3, redistest.Options{Persistent: true}, redlock.ACLRule)
	clients := redistest.ClientsAs(t, servers, "locker", "pw", &redis.Options{}) // go-redis defaults: RESP3, client identity
	l := newLocker(t, clients, redlock.WithRestartGuard(time.Minute))
	if err := l.Bootstrap(t.Context()); err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	rep := check(t, clients, doctor.WithRestartGuard(time.Minute))
	for _, f := range rep.Findings {
		if f.Unverified || strings.Contains(f.Summary, "NOPERM") {
			t.Errorf("Check with the rule: %s %s: %s", f.Check, f.Node, f.Summary)
		}
	}
	if g := rep.Nodes[0].Guard; !g.Known || !g.Current {
		t.Errorf("guard state under the rule: %+v", g)
	}
	for _, s := range servers {
		admin := redis.NewClient(&redis.Options{Addr: s.Addr, Username: "admin", Password: "admin"})
		log, err := admin.Do(t.Context(), "acl", "log").Slice()
		_ = admin.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(log) > 0 {
			t.Errorf("ACL LOG of %s shows refusals: %v", s.Addr, log)
		}
	}
}

// The checker's fixes, applied as they read, mend what they are about: a
// wrong or missing password gets an authentication fix (not "start the
// node"), and a user without the permissions gets the rule, which, given
// to that user, lets every check pass.
func TestCheckFixesOnRealServers(t *testing.T) {
	servers := redistest.StartSecuredT(t, 3)
	admin := make([]*redis.Client, len(servers))
	for i, s := range servers {
		admin[i] = redis.NewClient(&redis.Options{Addr: s.Addr, Password: "right", Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { _ = admin[i].Close() })
	}
	for _, tc := range []struct{ name, user, password, want string }{
		{"wrong password", "", "wrong-pw", "correct the user name or password"},
		{"no password", "", "", "give this node's password"},
	} {
		rep := check(t, redistest.ClientsAs(t, servers, tc.user, tc.password, nil))
		f := finding(t, rep, doctor.Reach, servers[0].Addr, "")
		if f.Severity != doctor.Error || !strings.Contains(f.Fix, tc.want) || strings.Contains(f.Fix, "start the node") {
			t.Fatalf("%s: %s [fix: %s]; want an authentication fix", tc.name, f.Summary, f.Fix)
		}
	}
	rep := check(t, redistest.ClientsAs(t, servers, "reader", "pw", nil))
	var fix string
	for _, f := range rep.Findings {
		if f.Severity == doctor.Error && strings.Contains(f.Fix, "ACL SETUSER") {
			fix = f.Fix
		}
	}
	if !strings.Contains(fix, "ACL SETUSER USER "+redlock.ACLRule+" (") {
		t.Fatalf("no ACL fix with the rule for a user without permissions:\n%s", dump(rep))
	}
	// Apply it as it reads, for the user "reader".
	words := strings.Fields(strings.TrimSpace(fix[:strings.Index(fix, " (")]))
	args := []any{"acl", "setuser", "reader"}
	for _, w := range words[3:] {
		args = append(args, w)
	}
	for _, c := range admin {
		if err := c.Do(t.Context(), args...).Err(); err != nil {
			t.Fatalf("the fix %q: %v", fix, err)
		}
	}
	rep = check(t, redistest.ClientsAs(t, servers, "reader", "pw", nil))
	for _, f := range rep.Findings {
		if f.Unverified || strings.Contains(f.Summary, "NOPERM") || f.Check == doctor.Scripts && f.Severity != doctor.OK {
			t.Errorf("after the fix: %s %s: %s", f.Check, f.Node, f.Summary)
		}
	}
}
