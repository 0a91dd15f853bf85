package redlock

import (
	"fmt"
	"net"
	"net/url"
	"reflect"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
)

// Locker hands out locks over a fixed set of independent Redis nodes. It is
// safe for concurrent use. The clients given to New stay the caller's:
// Close does not close them; those NewFromURLs built, it does.
type Locker struct {
	nodes []node
	need  int
	cfg   config
	// owned are the clients NewFromURLs built, closed by Close.
	owned []*redis.Client

	// mu guards closed; operations hold it for reading while they start
	// goroutines (see guard), so that Close's Wait never races an Add on
	// bg. unguard is mu.RUnlock, made once.
	mu      sync.RWMutex
	closed  bool
	unguard func()
	// bg tracks every goroutine that outlives the call that started it:
	// stragglers of a decided round and their clean-up.
	bg sync.WaitGroup

	notify *notifier
	gates  gates
	// ext keeps the locks given to KeepAlive extended.
	ext extender
	// forced logs this Locker's ForceRelease calls, for error text.
	forced forceLog
}

// New returns a Locker over the given clients, one per independent Redis
// master; a lock needs a majority of them (len/2+1). One client gives
// single-node mode, with the same code and guarantees bounded by that one
// server. The options become the defaults of every call.
//
// Each client must be a plain *redis.Client (redis.NewClient, or
// redis.NewFailoverClient for a Sentinel-managed master). The Locker takes
// only its options: it opens connections of its own, where no command is
// ever retried (a retried script would be a second vote from the same node,
// or undo a later hold), every read and write ends at the call's node
// timeout whatever the client's ContextTimeoutEnabled, ReadTimeout and
// WriteTimeout say, and every dial, TLS handshake included, is bounded by
// the node timeout given to New. A custom Dialer in the options must honour
// its context. The caller's hooks and client-side cache are not used.
//
// New fails with an error matching ErrInvalid when there are no clients, a
// client is nil, the same client or the same address is given twice (it
// would vote twice), a client is not a *redis.Client (a *redis.ClusterClient
// or a *redis.Ring is refused with a note on how to give one client per
// master; a wrapper type is refused as well), or an option is out of range.
//
// New does no I/O. Two addresses of one server (a host name and its IP, a
// proxy, a load balancer) are found at first contact instead: every new
// connection learns the server's identity (its run_id) before any call is
// sent on it, and a node that reaches a server another node reached first is
// out of every vote until Close, its calls failing with an error matching
// ErrInvalid that names both addresses. So that server never votes twice, and
// the first operation that hears from both nodes fails with that error.
func New(clients []redis.UniversalClient, opts ...Option) (*Locker, error) {
	if len(clients) == 0 {
		return nil, invalid("no clients")
	}
	cfg := defaultConfig()
	cfg.apply(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.tokenSet {
		return nil, invalid("WithToken names one lock's owner: give it to Obtain, TryObtain or Do, not New")
	}
	l := &Locker{nodes: make([]node, len(clients)), need: quorum.Majority(len(clients)), cfg: cfg}
	l.unguard = l.mu.RUnlock
	l.ext = extender{l: l, warn: keeperHeap{h: heapWarn}}
	seen := make(map[string]int, len(clients))
	for i, c := range clients {
		if isNil(c) {
			return nil, invalid("client %d is nil", i)
		}
		if _, err := nodeClient(i, c); err != nil {
			return nil, err
		}
		id, addr := identify(c, i)
		if j, dup := seen[id]; dup {
			return nil, invalid("clients %d and %d are the same node (%s): it would vote twice", j, i, addr)
		}
		seen[id] = i
		l.nodes[i] = node{addr: addr}
	}
	reg := newServers(l.Nodes())
	for i := range l.nodes {
		l.nodes[i].pipe = newPipe(clients[i].(*redis.Client), cfg.nodeTimeout, cfg.route())
		l.nodes[i].pipe.ident = &nodeIdentity{s: reg, node: i}
	}
	l.notify = newNotifier(l.nodes, &l.bg)
	return l, nil
}

func isNil(c redis.UniversalClient) bool {
	if c == nil {
		return true
	}
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// identify returns a key that is equal for two clients of the same server,
// and the server's address for messages, without credentials.
func identify(c redis.UniversalClient, i int) (id, addr string) {
	if o, ok := c.(interface{ Options() *redis.Options }); ok {
		opt := o.Options()
		// A sentinel-backed client reports this placeholder; tell such
		// clients apart by identity.
		if opt.Addr != "" && opt.Addr != "FailoverClient" {
			addr = redactAddr(opt.Addr)
			return "addr " + opt.Network + " " + normalizeAddr(addr), addr
		}
	}
	return fmt.Sprintf("client %p", c), fmt.Sprintf("node %d", i)
}

// normalizeAddr makes the usual spellings of the loopback host equal, so
// "localhost:6379" and "127.0.0.1:6379" count as one node.
func normalizeAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	switch host = strings.ToLower(host); host {
	case "", "localhost", "127.0.0.1", "::1":
		host = "loopback"
	}
	return net.JoinHostPort(host, port)
}

// redactAddr removes credentials from an address or URL.
func redactAddr(addr string) string {
	if strings.Contains(addr, "://") {
		if u, err := url.Parse(addr); err == nil {
			u.User = nil
			return u.String()
		}
	}
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// Nodes returns the nodes' addresses, credentials removed, in the order the
// clients were given.
func (l *Locker) Nodes() []string {
	out := make([]string, len(l.nodes))
	for i, n := range l.nodes {
		out[i] = n.addr
	}
	return out
}

// Quorum returns how many nodes must agree: len(nodes)/2+1.
func (l *Locker) Quorum() int { return l.need }

// Close ends the Locker's release subscriptions, waits for its background
// work (clean-up of late node replies) to end, and makes further calls fail
// with ErrClosed. Locks still held are not released; they expire by their
// TTL. Nothing extends them any more: the contexts of KeepAlive, Do and
// every Leadership end as Close begins, with a cause matching ErrLockLost
// and ErrClosed. Close does not close the clients given to New; it closes those
// that NewFromURLs built.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	// Work under KeepAlive or a Leadership stops now: nothing extends
	// its locks any more.
	l.ext.endAll()
	// Waiters sleeping until a local holder lets go learn of the close now.
	l.gates.pokeAll()
	// The notifier first: once closed it starts no more work on bg.
	l.notify.close()
	l.bg.Wait()
	// Every queued call has been answered (each holds a count on bg).
	for _, n := range l.nodes {
		n.pipe.close()
	}
	closeClients(l.owned)
	return nil
}

// callConfig is the configuration of one call on key: the Locker's,
// changed by opts. It fails with an error matching ErrInvalid for a bad key
// or bad options.
func (l *Locker) callConfig(key string, opts []Option) (config, error) {
	if err := checkKey(key); err != nil {
		return config{}, err
	}
	return l.options(opts)
}

// options is the Locker's configuration changed by opts, for one call. It
// fails with an error matching ErrInvalid for bad options.
func (l *Locker) options(opts []Option) (config, error) {
	cfg := l.cfg
	if len(opts) > 0 {
		cfg.apply(opts)
		if cfg.guard != l.cfg.guard {
			return cfg, invalid("WithRestartGuard is a property of the cluster: give it to New")
		}
		if cfg.redisLog != l.cfg.redisLog {
			return cfg, invalid("WithRedisLogger is a property of the Locker: give it to New")
		}
		if err := cfg.obs.perCall(l.cfg.obs); err != nil {
			return cfg, err
		}
		if err := cfg.validate(); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}
