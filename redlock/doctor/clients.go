package doctor

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// nodeConn is the checker's own client for one node, made from the
// caller's client's options as a Locker makes its own: the caller's client
// is never used, so none of its settings (retries, timeouts, hooks, a
// client-side cache) changes what is measured, and nothing is left in its
// pool.
type nodeConn struct {
	opts        *redis.Options
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	dialTimeout time.Duration
	client      *redis.Client // nil until connect succeeds

	mu    sync.Mutex
	first net.Conn // connect's connection, until the client takes it
}

func newNodeConn(caller *redis.Options, nodeTimeout time.Duration) *nodeConn {
	o := *caller
	// A command is never sent twice, and every wait follows the call's
	// deadline alone.
	o.MaxRetries = -1
	o.ContextTimeoutEnabled = true
	o.ReadTimeout, o.WriteTimeout = -1, -1
	o.DialerRetries = 1
	o.DialTimeout, o.PoolTimeout = nodeTimeout, nodeTimeout
	// Nothing of the caller's client-side state: no cache, rate limiter,
	// auto-pipelining or maintenance notifications.
	o.ClientSideCacheConfig, o.ClientSideCache = nil, nil
	o.Limiter = nil
	o.AutoPipelineOptions = nil
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	// The checks run one after the other on each node.
	o.PoolSize, o.MinIdleConns, o.MaxIdleConns = 2, 0, 1
	dial := caller.Dialer
	if dial == nil || isDefaultDialer(dial) {
		dial = contextDialer(caller.TLSConfig)
	}
	return &nodeConn{opts: &o, dial: dial, dialTimeout: nodeTimeout}
}

// connect dials the node itself, within the node timeout, and makes the
// client that then uses this connection first. go-redis writes every
// failed dial of a client to its process-wide logger; dialling an
// unreachable node here keeps such lines off the program's stderr (a
// Locker marks its own for redlock.RedisLogger instead).
func (n *nodeConn) connect(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, n.dialTimeout)
	defer cancel()
	conn, err := n.dial(dctx, n.opts.Network, n.opts.Addr)
	if err != nil {
		return err
	}
	n.first = conn
	o := *n.opts
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if c := n.takeFirst(); c != nil {
			return c, nil
		}
		return n.dial(ctx, network, addr)
	}
	n.client = redis.NewClient(&o)
	return nil
}

// takeFirst returns connect's connection once, then nil.
func (n *nodeConn) takeFirst() net.Conn {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.first
	n.first = nil
	return c
}

// close closes the client and its connections, which are the checker's
// alone: nothing to report.
func (n *nodeConn) close() {
	if c := n.takeFirst(); c != nil {
		_ = c.Close()
	}
	if n.client != nil {
		_ = n.client.Close()
	}
}

// isDefaultDialer reports whether dial is the dialer go-redis gives a
// client that has none of its own (a closure of redis.NewDialer, named for
// it wherever the compiler inlined it). That dialer bounds a TLS handshake
// by the caller's DialTimeout only, not by the context.
func isDefaultDialer(dial func(context.Context, string, string) (net.Conn, error)) bool {
	f := runtime.FuncForPC(reflect.ValueOf(dial).Pointer())
	if f == nil {
		return false
	}
	name := f.Name()
	return strings.HasPrefix(name, "github.com/redis/go-redis/v9.") && strings.Contains(name, "NewDialer.func")
}

// contextDialer dials TCP, with TLS when config is set, until ctx ends.
func contextDialer(config *tls.Config) func(context.Context, string, string) (net.Conn, error) {
	nd := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
	if config == nil {
		return nd.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := config
		if cfg.ServerName == "" {
			// As tls.Dialer does: verify the host that was dialled.
			host, _, _ := net.SplitHostPort(addr)
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close() // the handshake's error is the one to report
			return nil, fmt.Errorf("redlock: TLS handshake with %s: %w", addr, err)
		}
		return tc, nil
	}
}

// nodeAddr returns the address of client i for the report, credentials
// removed, and a key equal for two clients of the same address ("" when
// the address says nothing, as a Sentinel-backed client's does).
func nodeAddr(o *redis.Options, i int) (addr, key string) {
	addr = o.Addr
	if j := strings.LastIndexByte(addr, '@'); j >= 0 {
		addr = addr[j+1:]
	}
	if addr == "" || addr == "FailoverClient" {
		return fmt.Sprintf("node %d", i), ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, o.Network + " " + strings.ToLower(addr)
	}
	switch host = strings.ToLower(host); host {
	case "", "localhost", "127.0.0.1", "::1":
		host = "loopback"
	}
	return addr, o.Network + " " + net.JoinHostPort(host, port)
}
