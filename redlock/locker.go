package redlock

import (
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/nodeinfo"
	"github.com/quorumlock/redlock/redlock/internal/notify"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Locker hands out locks over a fixed set of independent Redis nodes. It is
// safe for concurrent use.
type Locker struct {
	nodes []node
	need  int
	cfg   config
	// owned are the clients NewFromNodeURLs built, closed by Close.
	owned []io.Closer

	// mu guards closed; operations hold it for reading while they start
	// goroutines (see guard), so that Close's Wait never races an Add on
	// bg. unguard is mu.RUnlock, made once.
	mu      sync.RWMutex
	closed  bool
	unguard func()
	// bg tracks every goroutine that outlives the call that started it:
	// stragglers of a decided round and their clean-up.
	bg sync.WaitGroup

	notify *notify.Notifier
	gates  gates
	// ext keeps the locks given to KeepAlive extended.
	ext extender
	// forced logs this Locker's ForceRelease calls, for error text.
	forced forceLog
	// health is each node's last known state (see Health).
	health healthTracker
}

// New returns a Locker over clients, one *redis.Client per independent
// Redis master (a lock needs len/2+1; one client is single-node mode), with
// opts as every call's defaults: NewNodes with each client a Server. It
// does no I/O: the Locker opens its own connections from the clients'
// options (docs/internals.md#node-calls), and every command it sends passes
// through the go-redis hooks each client has now. It fails with ErrInvalid
// for no clients, a nil client, a Sentinel failover client
// (redis.NewFailoverClient: unsafe after a failover), a client or address
// given twice, or a bad option; nodes found to reach one server fail their
// calls with ErrInvalid (docs/safety.md#one-server-one-vote).
func New(clients []*redis.Client, opts ...Option) (*Locker, error) {
	nodes, err := nodeinfo.Servers(clients, Server)
	if err != nil {
		return nil, invalid("%w", err)
	}
	return NewNodes(nodes, opts...)
}

// NewNodes returns a Locker over nodes, each one vote of an independent
// Redis deployment (a lock needs len/2+1; one node is single-node mode),
// with opts as every call's defaults. It does no I/O. It fails with
// ErrInvalid for no nodes, a nil node, a node that Server refuses, one
// server given twice, or a bad option.
func NewNodes(nodes []Node, opts ...Option) (*Locker, error) {
	cfg := defaultConfig()
	applyAll(&cfg, opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.tokenSet {
		return nil, invalid("WithToken names one lock's owner: give it to Obtain, TryObtain or Do, not New")
	}
	infos, opens, err := nodeinfo.Describe(nodes, Node.spec)
	if err != nil {
		return nil, invalid("%w", err)
	}
	// One layout for every node: a lock's calls are built once for all
	// of them.
	if slices.ContainsFunc(infos, func(d nodeinfo.Node) bool { return d.Kind == nodeinfo.KindCluster }) {
		cfg.layout = wire.Clustered
	}
	l := &Locker{nodes: make([]node, len(nodes)), need: quorum.Majority(len(nodes)), cfg: cfg}
	l.unguard = l.mu.RUnlock
	l.ext = extender{l: l, warn: keeperHeap{h: heapWarn}}
	for i, d := range infos {
		l.nodes[i] = node{addr: d.Addr, note: func(err error) { l.noteNode(i, err) }}
	}
	reg := conn.NewServers(l.Nodes())
	for i, open := range opens {
		l.nodes[i].pipe = open(linkEnv{cfg: &l.cfg, ident: reg.Node(i)})
		if cfg.guard > 0 {
			l.nodes[i].pipe.UseFunctions()
		}
	}
	l.notify = notify.New(releaseSubscribers(l.nodes), &l.bg, cfg.nodeTimeout)
	return l, nil
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

// Close makes further calls fail with ErrClosed, ends every KeepAlive, Do
// and Leadership (ErrLockLost and ErrClosed), waits for its background work
// and closes the clients that NewFromURLs or NewFromNodeURLs built. Held
// locks expire by their TTL. It returns nil; calling it again does nothing.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.health.closed.Store(true)
	l.mu.Unlock()
	// Work under KeepAlive or a Leadership stops now: nothing extends
	// its locks any more.
	l.ext.endAll()
	// Waiters sleeping until a local holder lets go learn of the close now.
	l.gates.pokeAll()
	// Connections being set up stop now (they may take the client's
	// DialTimeout): the calls queued behind them fail or go out within
	// their node timeout, and the subscriptions can close at once.
	for _, n := range l.nodes {
		n.pipe.EndSetUps()
	}
	// Then the notifier: once closed it starts no more work on bg.
	l.notify.Close()
	l.bg.Wait()
	// Every queued call has been answered (each holds a count on bg).
	for _, n := range l.nodes {
		n.pipe.Close()
	}
	closeClients(l.owned)
	return nil
}

// callConfig is the configuration of one call on key: the Locker's,
// changed by opts. It fails with an error matching ErrInvalid for a bad key
// or bad options.
func (l *Locker) callConfig(key string, opts []LockOption) (config, error) {
	if err := checkKey(key); err != nil {
		return config{}, err
	}
	return l.options(opts)
}

// options is the Locker's configuration changed by opts, for one call. It
// fails with an error matching ErrInvalid for bad options.
func (l *Locker) options(opts []LockOption) (config, error) {
	cfg := l.cfg
	if len(opts) > 0 {
		applyAll(&cfg, opts)
		if err := cfg.validate(); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}
