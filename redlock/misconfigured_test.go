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

// secured starts three servers that require the password "right" for the
// default user and have ACL users for the tests: "reader", who may run
// only read commands (no EVALSHA), and "scripter", who may run scripts but
// not the commands the scripts run.
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

// A refusal no retry mends (a wrong password, a missing ACL permission for
// our commands or for those our scripts run) on a majority of nodes makes
// Obtain and Do give up at once with ErrMisconfigured, even with a context
// that never ends, naming the node's own reply and never the password.
func TestMisconfiguredGivesUpAtOnce(t *testing.T) {
	servers := secured(t)
	cases := []struct {
		name, user, password, want string
	}{
		{"wrong password", "", "secret-wrong-pw", "WRONGPASS"},
		{"no password", "", "", "NOAUTH"},
		{"no permission", "reader", "pw", "NOPERM"},
		{"script denied", "scripter", "pw", "can't run this command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocker(t, clientsAs(t, servers, tc.user, tc.password, nil), redlock.WithRetry(redlock.LinearBackoff(10*time.Millisecond)))
			calls := map[string]func(ctx context.Context) error{
				"Obtain": func(ctx context.Context) error {
					_, err := l.Obtain(ctx, "k")
					return err
				},
				"Do": func(ctx context.Context) error {
					return l.Do(ctx, "k", func(context.Context) error {
						t.Error("fn ran")
						return nil
					})
				},
			}
			for name, call := range calls {
				// A context that does not end within the test: Background,
				// cut long after the answer is due so that a hang fails the
				// test rather than stall it.
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				begin := time.Now()
				err := call(ctx)
				took := time.Since(begin)
				ended := ctx.Err()
				cancel()
				switch {
				case ended != nil:
					t.Fatalf("%s: still retrying after %v: %v", name, took, err)
				case !errors.Is(err, redlock.ErrMisconfigured) || errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, redlock.ErrNotObtained):
					t.Fatalf("%s: %v; want ErrMisconfigured only", name, err)
				case !strings.Contains(err.Error(), tc.want):
					t.Fatalf("%s: %v; want the node's reply (%s)", name, err, tc.want)
				case tc.password != "" && strings.Contains(err.Error(), tc.password):
					t.Fatalf("%s: the error prints the password: %v", name, err)
				case took > 5*time.Second:
					t.Fatalf("%s: gave up after %v; want at once", name, took)
				}
				t.Logf("%s: %v", name, err)
			}
		})
	}
}

// A server that does not know a command we send (here EVALSHA, renamed
// away) refuses it for good as well.
func TestMisconfiguredUnknownCommand(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{Args: []string{"--rename-command", "EVALSHA", ""}})
	l := newLocker(t, redistest.ClientsT(t, servers))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := l.Obtain(ctx, "k")
	if ctx.Err() != nil || !errors.Is(err, redlock.ErrMisconfigured) || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("Obtain from servers without EVALSHA: %v (context: %v); want ErrMisconfigured at once", err, ctx.Err())
	}
}
