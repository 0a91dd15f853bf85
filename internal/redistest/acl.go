package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ACL users for the tests of what a node's permissions let through: the
// library's refusals and the deployment checker's findings.

// StartSecuredT starts n servers for a test whose default user needs the
// password "right", with two users short of a lock library's permissions,
// both with the password "pw": "reader", who may run read commands but no
// scripts, and "scripter", who may run scripts but not the commands the
// scripts run. It stops them at cleanup.
func StartSecuredT(t testing.TB, n int) []*Server {
	t.Helper()
	servers := StartT(t, n, Options{Args: []string{"--requirepass", "right"}})
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: "right", Protocol: 2, DisableIdentity: true})
		err := SetUser(t.Context(), c, "reader", "pw", "~* &* +@read +ping +hello +auth +client +info")
		if err == nil {
			err = SetUser(t.Context(), c, "scripter", "pw", "~* &* +evalsha +eval +script +ping +hello +auth +client +info")
		}
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return servers
}

// StartACLT starts n servers with opts for a test, with a user "locker"
// (password "pw") given exactly rule, a user "admin" (password "admin")
// given every permission, and the default user disabled. It stops them at
// cleanup.
func StartACLT(t testing.TB, n int, opts Options, rule string) []*Server {
	t.Helper()
	servers := StartT(t, n, opts)
	for _, s := range servers {
		c := s.NewClient()
		err := SetUser(t.Context(), c, "locker", "pw", rule)
		if err == nil {
			err = SetUser(t.Context(), c, "admin", "admin", "~* &* +@all")
		}
		if err == nil {
			err = c.Do(t.Context(), "acl", "setuser", "default", "off").Err()
		}
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return servers
}

// SetUser makes user, through c, a user with password and exactly the
// permissions of rule (ACL SETUSER's words, separated by spaces), whatever
// it had before.
func SetUser(ctx context.Context, c *redis.Client, user, password, rule string) error {
	args := []any{"acl", "setuser", user, "reset", "on", ">" + password}
	for _, r := range strings.Fields(rule) {
		args = append(args, r)
	}
	if err := c.Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("ACL SETUSER %s %s: %w", user, rule, err)
	}
	return nil
}

// ClientsAs returns a client for each of servers that logs in as user
// with password, closed at cleanup: with the test clients' options (RESP2,
// no client identity, no retries), or with opt's (go-redis's defaults for
// &redis.Options{}) where opt is not nil.
func ClientsAs(t testing.TB, servers []*Server, user, password string, opt *redis.Options) []*redis.Client {
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
