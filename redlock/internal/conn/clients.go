package conn

import (
	"context"
	"crypto/tls"
	"net"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// poolRoom is the size of the pools of the lock's own clients (see
// ClientOptions). It costs 8 bytes a connection of room, whether used or
// not.
const poolRoom = 1024

// ClientOptions derives the options of the lock's own clients for a node
// from the caller's: same server, credentials, TLS and database, but the
// lock's rules for every wait and retry. timeout, the Locker's node
// timeout, bounds every dial (with its TLS handshake) and every pool wait.
// cmd is for the scripts, whose calls always carry a deadline: reads and
// writes wait exactly as long as it allows (a per-call WithNodeTimeout above
// timeout included). sub is for the release subscriptions, where go-redis
// also waits on its own (a health check, a reconnect): there timeout bounds
// every read and write that no deadline of ours does.
func ClientOptions(caller *redis.Options, timeout time.Duration) (cmd, sub *redis.Options) {
	o := *caller
	// No script is ever sent twice: a script retried after a broken
	// connection (its first run may have been applied, its reply lost)
	// would be a second vote from the same node, or undo a later hold.
	o.MaxRetries = -1
	// Every wait on the node follows the call's deadline.
	o.ContextTimeoutEnabled = true
	// One dial per call: the pool's dial retries back off on timers that
	// ignore the deadline (they wait on the context's Done channel, which
	// a worker's context lacks), and a second dial could not succeed in
	// time anyway.
	o.DialerRetries = 1
	o.DialTimeout = timeout
	o.Dialer = boundedDialer(caller)
	// The scripts need nothing else, and the lock's connections must not
	// change state the caller's client shares: no client-side cache (which
	// would track keys on our connections), no rate limiter or circuit
	// breaker of the caller's (whose state our calls would count in), no
	// server maintenance notifications (a connection that breaks in a
	// failover is simply replaced, and go-redis's automatic mode rewrites
	// options when a server lacks them).
	o.ClientSideCacheConfig, o.ClientSideCache = nil, nil
	o.Limiter = nil
	o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	o.AutoPipelineOptions = nil
	// A pool turn is only ever waited for by a subscription; the workers
	// hold a connection each.
	o.PoolTimeout = timeout
	// Room for far more connections than the workers hold, because a
	// go-redis pool stops dialling once it has counted as many failed
	// dials as it has room for (over its whole life), and then only
	// probes the server once a second. The workers' failed dials never
	// reach the pool (see dial.go); with this room, the calls outside the
	// queues (Pipe.Client, the deployment checker's clients) lose their
	// node only after that many failed dials, a long outage.
	o.PoolSize = poolRoom
	o.MinIdleConns, o.MaxIdleConns = 0, WorkersPerNode

	c, s := o, o
	// -1: no timeout of go-redis's own; the call's deadline alone.
	c.ReadTimeout, c.WriteTimeout = -1, -1
	s.ReadTimeout, s.WriteTimeout = timeout, timeout
	return &c, &s
}

// isDefaultDialer reports whether dial is the dialer go-redis gives a client
// that has none of its own: a closure of redis.NewDialer, named for it
// wherever the compiler inlined it ("....(*Options).init.NewDialer.func1").
// Functions cannot be compared, and the closure's code is copied where it
// is inlined, so its name is what identifies it.
func isDefaultDialer(dial func(context.Context, string, string) (net.Conn, error)) bool {
	f := runtime.FuncForPC(reflect.ValueOf(dial).Pointer())
	if f == nil {
		return false
	}
	name := f.Name()
	return strings.HasPrefix(name, "github.com/redis/go-redis/v9.") && strings.Contains(name, "NewDialer.func")
}

// boundedDialer returns the dialer of the lock's own connections for a node:
// the caller's dialer, called with a context that ends at the call's
// deadline. go-redis's default dialer is replaced by the same dial that
// honours the context in the TLS handshake too (the default bounds a
// handshake only by the client's DialTimeout, 5 s unless set).
func boundedDialer(caller *redis.Options) func(context.Context, string, string) (net.Conn, error) {
	dial := caller.Dialer
	if dial == nil || isDefaultDialer(dial) {
		dial = contextDialer(caller.TLSConfig)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		// A worker's context carries only a deadline; a dial and a TLS
		// handshake stop on the Done channel, so give them one.
		if dl, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl)
			defer cancel()
		}
		return dial(ctx, network, addr)
	}
}

// contextDialer dials TCP, with TLS when config is set, until ctx ends.
func contextDialer(config *tls.Config) func(context.Context, string, string) (net.Conn, error) {
	// The same keep-alive as go-redis's own dialer: a peer that vanished
	// is noticed on an idle connection too.
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
			// Named as the handshake's: its own text may be only
			// "context deadline exceeded" (a server that does not speak
			// TLS waits for more bytes).
			return nil, &handshakeError{addr: addr, err: err}
		}
		return tc, nil
	}
}

// handshakeError is a failed TLS handshake of the lock's own dialer.
type handshakeError struct {
	addr string
	err  error
}

func (e *handshakeError) Error() string {
	return "redlock: TLS handshake with " + e.addr + ": " + e.err.Error()
}

func (e *handshakeError) Unwrap() error { return e.err }
