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

// secured starts three servers with a password ("right") and two users
// short of the library's permissions: "reader" (reads, no scripts) and
// "scripter" (scripts, no reads), both with password "pw".
func secured(t *testing.T) []*redistest.Server {
	t.Helper()
	servers := redistest.StartT(t, 3, redistest.Options{Args: []string{"--requirepass", "right"}})
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "right", Protocol: 2, DisableIdentity: true})
		for _, rule := range [][]any{
			{"acl", "setuser", "reader", "on", ">pw", "~*", "&*", "+@read", "+ping", "+hello", "+auth", "+client", "+info"},
			{"acl", "setuser", "scripter", "on", ">pw", "~*", "&*", "+evalsha", "+eval", "+script", "+ping", "+hello", "+auth", "+client", "+info"},
		} {
			if err := c.Do(t.Context(), rule...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return servers
}

// clientsAs returns clients of servers that log in as user with password:
// with the test clients' options (RESP2, no client identity, no retries),
// or go-redis's defaults where opt is nil.
func clientsAs(t *testing.T, servers []*redistest.Server, user, password string, opt *redis.Options) []*redis.Client {
	t.Helper()
	if opt == nil {
		opt = &redis.Options{Protocol: 2, DisableIdentity: true, MaxRetries: -1}
	}
	var out []*redis.Client
	for _, s := range servers {
		o := *opt
		o.Addr, o.Username, o.Password = s.Addr, user, password
		c := redis.NewClient(&o)
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		})
		out = append(out, c)
	}
	return out
}

// A user given exactly redlock.ACLRule passes every check, on nodes that
// carry the restart guard's markers, without a single refusal.
func TestCheckUnderACLRule(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{Persistent: true})
	for _, s := range servers {
		c := s.NewClient()
		args := []any{"acl", "setuser", "locker", "reset", "on", ">pw"}
		for _, r := range strings.Fields(redlock.ACLRule) {
			args = append(args, r)
		}
		if err := c.Do(t.Context(), args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER locker %s: %v", redlock.ACLRule, err)
		}
		if err := c.Do(t.Context(), "acl", "setuser", "admin", "on", ">admin", "~*", "&*", "+@all").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(t.Context(), "acl", "setuser", "default", "off").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	clients := clientsAs(t, servers, "locker", "pw", &redis.Options{}) // go-redis defaults: RESP3, client identity
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
	servers := secured(t)
	admin := make([]*redis.Client, len(servers))
	for i, s := range servers {
		admin[i] = redis.NewClient(&redis.Options{Addr: s.Addr, Password: "right", Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { _ = admin[i].Close() })
	}
	for _, tc := range []struct{ name, user, password, want string }{
		{"wrong password", "", "wrong-pw", "correct the user name or password"},
		{"no password", "", "", "give this node's password"},
	} {
		rep := check(t, clientsAs(t, servers, tc.user, tc.password, nil))
		f := finding(t, rep, doctor.Reach, servers[0].Addr, "")
		if f.Severity != doctor.Error || !strings.Contains(f.Fix, tc.want) || strings.Contains(f.Fix, "start the node") {
			t.Fatalf("%s: %s [fix: %s]; want an authentication fix", tc.name, f.Summary, f.Fix)
		}
	}
	rep := check(t, clientsAs(t, servers, "reader", "pw", nil))
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
	rep = check(t, clientsAs(t, servers, "reader", "pw", nil))
	for _, f := range rep.Findings {
		if f.Unverified || strings.Contains(f.Summary, "NOPERM") || f.Check == doctor.Scripts && f.Severity != doctor.OK {
			t.Errorf("after the fix: %s %s: %s", f.Check, f.Node, f.Summary)
		}
	}
}
