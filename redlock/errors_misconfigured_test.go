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

// A refusal no retry mends (a wrong password, a missing ACL permission for
// our commands or for those our scripts run) on a majority of nodes makes
// Obtain and Do give up at once with ErrMisconfigured, even with a context
// that never ends, naming the node's own reply and never the password.
func TestMisconfiguredGivesUpAtOnce(t *testing.T) {
	servers := redistest.StartSecuredT(t, 3)
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
			l := newLocker(t, redistest.ClientsAs(t, servers, tc.user, tc.password, nil), redlock.WithRetry(redlock.LinearBackoff(10*time.Millisecond)))
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

// Mistakes in the nodes' configuration that no retry mends give up at once
// with ErrMisconfigured, naming the node and the cause, even with a
// context that never ends: a database index the servers do not have, a
// majority of replicas, a TLS client against plain servers and a plain
// client against TLS ports.
func TestMistakesFailFast(t *testing.T) {
	t.Parallel()
	plain := newCluster(t, 3)
	tlsServers := redistest.StartTLST(t, 3)
	opts := func() *redis.Options {
		return &redis.Options{Protocol: 2, DisableIdentity: true, MaxRetries: -1, DialTimeout: 5 * time.Second}
	}
	clients := func(addrs []string, set func(*redis.Options)) []*redis.Client {
		var out []*redis.Client
		for _, addr := range addrs {
			o := opts()
			o.Addr = addr
			set(o)
			c := redis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			out = append(out, c)
		}
		return out
	}
	var plainAddrs, tlsAddrs []string
	for i := range 3 {
		plainAddrs = append(plainAddrs, plain.servers[i].Addr)
		tlsAddrs = append(tlsAddrs, tlsServers[i].TLSAddr)
	}
	replicas := []string{
		redistest.StartReplicaT(t, plain.servers[0], redistest.Options{}).Addr,
		redistest.StartReplicaT(t, plain.servers[1], redistest.Options{}).Addr,
		plain.servers[2].Addr,
	}
	cases := []struct {
		name    string
		clients []*redis.Client
		want    []string // in the error, besides a node's address
	}{
		{"database out of range", clients(plainAddrs, func(o *redis.Options) { o.DB = 99 }),
			[]string{"database index out of range", "DB index is out of range"}},
		{"majority of replicas", clients(replicas, func(*redis.Options) {}),
			[]string{"refused as a replica", "READONLY"}},
		{"TLS client, plain server", clients(plainAddrs, func(o *redis.Options) { o.TLSConfig = tlsServers[0].Config.Clone() }),
			[]string{"TLS mismatch: the client speaks TLS (rediss://) and the server on this port does not"}},
		{"plain client, TLS port", clients(tlsAddrs, func(*redis.Options) {}),
			[]string{"TLS mismatch: the server speaks TLS on this port and the client does not"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLocker(t, tc.clients, redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithRetry(redlock.LinearBackoff(10*time.Millisecond)))
			// A context that does not end within the test: a wait that
			// runs into it fails the test (not a bound on how fast).
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := l.Obtain(ctx, "k")
			switch {
			case ctx.Err() != nil:
				t.Fatalf("Obtain still retrying when its context ended: %v", err)
			case !errors.Is(err, redlock.ErrMisconfigured) || errors.Is(err, redlock.ErrNoQuorum):
				t.Fatalf("Obtain: %v; want ErrMisconfigured only", err)
			case !strings.Contains(err.Error(), "127.0.0.1:"):
				t.Errorf("Obtain: %v; want the node named", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Obtain: %v; want it to say %q", err, want)
				}
			}
			t.Logf("%v", err)
		})
	}
}
