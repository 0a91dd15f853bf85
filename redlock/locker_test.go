package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

func TestNewRejectsBadInput(t *testing.T) {
	c := newCluster(t, 2)
	a, b := c.clients[0], c.clients[1]
	addr := c.servers[0].Addr
	port := addr[strings.LastIndexByte(addr, ':'):]
	sameAddr := redis.NewClient(&redis.Options{Addr: "localhost" + port})
	t.Cleanup(func() { _ = sameAddr.Close() })
	secret := redis.NewClient(&redis.Options{Addr: "localhost" + port, Password: "hunter2-secret"})
	t.Cleanup(func() { _ = secret.Close() })
	var nilClient *redis.Client

	tests := []struct {
		name    string
		clients []*redis.Client
		opts    []redlock.Option
		want    string
	}{
		{"no clients", nil, nil, "no clients"},
		{"nil client", []*redis.Client{a, nil}, nil, "client 1 is nil"},
		{"typed nil client", []*redis.Client{a, nilClient}, nil, "client 1 is nil"},
		{"same client twice", []*redis.Client{a, b, a}, nil, "same node"},
		{"same address twice", []*redis.Client{a, sameAddr}, nil, "same node"},
		{"same address, password hidden", []*redis.Client{a, secret}, nil, "same node"},
		{"zero TTL", []*redis.Client{a}, []redlock.Option{redlock.WithTTL(0)}, "TTL"},
		{"TTL not above drift", []*redis.Client{a}, []redlock.Option{redlock.WithTTL(2 * time.Millisecond)}, "not above the clock drift"},
		{"negative drift", []*redis.Client{a}, []redlock.Option{redlock.WithDriftFactor(-0.1)}, "drift factor"},
		{"drift factor 1", []*redis.Client{a}, []redlock.Option{redlock.WithDriftFactor(1)}, "drift factor"},
		{"zero node timeout", []*redis.Client{a}, []redlock.Option{redlock.WithNodeTimeout(0)}, "node timeout"},
		{"node timeout above TTL", []*redis.Client{a}, []redlock.Option{redlock.WithTTL(time.Second), redlock.WithNodeTimeout(2 * time.Second)}, "node timeout"},
		{"nil retry", []*redis.Client{a}, []redlock.Option{redlock.WithRetry(nil)}, "RetryStrategy"},
		{"bad backoff", []*redis.Client{a}, []redlock.Option{redlock.WithRetry(redlock.ExponentialBackoff(time.Second, time.Millisecond))}, "ExponentialBackoff"},
		{"bad linear", []*redis.Client{a}, []redlock.Option{redlock.WithRetry(redlock.LinearBackoff(0))}, "LinearBackoff"},
		{"negative limit", []*redis.Client{a}, []redlock.Option{redlock.WithRetry(redlock.LimitRetry(redlock.NoRetry(), -1))}, "LimitRetry"},
		{"nil clock", []*redis.Client{a}, []redlock.Option{redlock.WithClock(nil)}, "clock"},
		{"token on New", []*redis.Client{a}, []redlock.Option{redlock.WithToken("t")}, "WithToken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := redlock.New(tt.clients, tt.opts...)
			if err == nil {
				_ = l.Close()
				t.Fatal("New succeeded, want an error")
			}
			if !errors.Is(err, redlock.ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error %q shows a password", err)
			}
		})
	}
}

func TestClosedLocker(t *testing.T) {
	c := newCluster(t, 1)
	l, err := redlock.New(c.clients, testOpts...)
	if err != nil {
		t.Fatal(err)
	}
	lock := mustObtain(t, l, "k")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Obtain(t.Context(), "k"); !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("Obtain after Close: %v", err)
	}
	if err := lock.Release(t.Context()); !errors.Is(err, redlock.ErrClosed) {
		t.Fatalf("Release after Close: %v", err)
	}
}

// A node that refuses our credentials is reported with the server's reason,
// never with the password.
func TestWrongPasswordIsReported(t *testing.T) {
	servers := redistest.StartT(t, 1, redistest.Options{})
	admin := servers[0].NewClient()
	defer admin.Close()
	if err := admin.ConfigSet(t.Context(), "requirepass", "right-Pa55").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: servers[0].Addr, Password: "wr0ng-Pa55", MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	l := newLocker(t, []*redis.Client{c})
	_, err := l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrMisconfigured) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("TryObtain with a wrong password: %v; want ErrMisconfigured with the server's WRONGPASS", err)
	}
	if strings.Contains(err.Error(), "Pa55") {
		t.Fatalf("error shows a password: %v", err)
	}
}

// A Sentinel failover client is refused: the Locker's own connections
// would keep voting on a master that Sentinel demoted.
func TestNewRefusesFailoverClient(t *testing.T) {
	c := newCluster(t, 2)
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() {
		if err := fc.Close(); err != nil {
			t.Error(err)
		}
	})
	l, err := redlock.New([]*redis.Client{c.clients[0], fc, c.clients[1]})
	if l != nil {
		t.Cleanup(func() {
			if err := l.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "node 1 is a Sentinel failover client") {
		t.Fatalf("New with a failover client: %v; want ErrInvalid naming it", err)
	}
}

// NewNodes takes Servers as New takes clients, and refuses what New
// refuses, a nil Node too.
func TestNewNodes(t *testing.T) {
	c := newCluster(t, 3)
	l, err := redlock.NewNodes([]redlock.Node{redlock.Server(c.clients[0]), redlock.Server(c.clients[1]), redlock.Server(c.clients[2])}, testOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	if l.Quorum() != 2 || len(l.Nodes()) != 3 {
		t.Fatalf("quorum %d of %q, want 2 of 3", l.Quorum(), l.Nodes())
	}
	lock := mustObtain(t, l, "k")
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() {
		if err := fc.Close(); err != nil {
			t.Error(err)
		}
	})
	a := redlock.Server(c.clients[0])
	for _, tt := range []struct {
		name  string
		nodes []redlock.Node
		want  string
	}{
		{"no nodes", nil, "no nodes"},
		{"nil node", []redlock.Node{a, nil}, "node 1 is nil"},
		{"server of nil", []redlock.Node{a, redlock.Server(nil)}, "node 1 is a Server of a nil client"},
		{"failover client", []redlock.Node{a, redlock.Server(fc)}, "node 1 is a Sentinel failover client"},
		{"same server twice", []redlock.Node{a, redlock.Server(c.clients[1]), a}, "nodes 0 and 2 are the same node"},
	} {
		l, err := redlock.NewNodes(tt.nodes)
		if l != nil {
			if err := l.Close(); err != nil {
				t.Error(err)
			}
		}
		if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want ErrInvalid saying %q", tt.name, err, tt.want)
		}
	}
}
