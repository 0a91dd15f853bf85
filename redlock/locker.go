package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/quorum"
)

// Locker hands out locks over a fixed set of independent Redis nodes. It is
// safe for concurrent use. The clients stay the caller's: Close does not
// close them.
type Locker struct {
	nodes []node
	need  int
	cfg   config

	// mu guards closed; operations hold it for reading while they start
	// goroutines, so that Close's Wait never races an Add on bg.
	mu     sync.RWMutex
	closed bool
	// bg tracks every goroutine that outlives the call that started it:
	// stragglers of a decided round and their clean-up.
	bg sync.WaitGroup

	notify *notifier
	gates  gates
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
		l.nodes[i].pipe = newPipe(clients[i].(*redis.Client), cfg.nodeTimeout)
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
// TTL. Close does not close the clients.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	// Waiters sleeping until a local holder lets go learn of the close now.
	l.gates.pokeAll()
	// The notifier first: once closed it starts no more work on bg.
	l.notify.close()
	l.bg.Wait()
	// Every queued call has been answered (each holds a count on bg).
	for _, n := range l.nodes {
		n.pipe.close()
	}
	return nil
}

// closedErr is ErrClosed once the Locker is closed.
func (l *Locker) closedErr() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	return nil
}

// enter marks the start of an operation that may start goroutines; it
// returns ErrClosed after Close. The caller must call l.mu.RUnlock.
func (l *Locker) enter() error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (l *Locker) callConfig(key string, opts []Option) (config, error) {
	if err := checkKey(key); err != nil {
		return config{}, err
	}
	cfg := l.cfg
	if len(opts) > 0 {
		cfg.apply(opts)
		if cfg.guard != l.cfg.guard {
			return cfg, invalid("WithRestartGuard is a property of the cluster: give it to New")
		}
		if err := cfg.validate(); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// Obtain acquires the lock on key, retrying per the retry strategy
// (WithRetry, DefaultRetry by default) until it succeeds, the strategy gives
// up, or ctx ends.
//
// While the key is held by another owner, Obtain waits for the holder's
// release: it wakes as soon as any node announces it (one subscription per
// node, shared by every waiter of the Locker), and otherwise retries on its
// timer, never sleeping past the moment the holder's keys expire. Goroutines
// of one Locker that wait for the same key line up in arrival order and only
// the first contends on the nodes, so they take turns instead of splitting
// the votes among themselves (a re-entry with WithToken skips the line).
// When a goroutine of the same Locker releases the key, the first in line
// usually gets the lock in the release's own round trip (a handoff: on every
// node the key goes from the old owner to the new one in one atomic step);
// after a few handoffs in a row the key is released for everyone, so that
// waiters in other processes get their turn.
// With WithFailFast it gives up at once when the holder's keys outlive ctx's
// deadline.
//
// The key must be non-empty, at most MaxKeyLen bytes, and must not start
// with ReservedPrefix ("redlock:"), which names the library's own keys (the
// restart guard's markers, fencing counters, release channels); any other
// byte string is a key. A bad key fails at once with an error matching
// ErrInvalid, before any node is asked; so do bad options.
//
// On failure it returns no lock, leaves no key of its own on any node (late
// replies are cleaned up in the background), and an error that matches
// ErrNotObtained (contention) or ErrNoQuorum (outage) with per-node detail of
// the last round in a *QuorumError; when ctx ended, the error also matches
// ctx.Err(). Which of the two is told from the nodes' answers, never from the
// context: a wait that a deadline ends during an outage is ErrNoQuorum. A ctx
// that has ended before the call asks no node: the error then matches only
// ctx.Err().
func (l *Locker) Obtain(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	cfg, err := l.callConfig(key, opts)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, notTried(ctx, key)
	}
	// err, nil here, is the last round's error from now on.
	seq := cfg.retry.Start()
	var (
		timer *time.Timer
		wake  <-chan struct{}
		// queued is set once this call waits in the Locker's line for key
		// (see gates); a re-entry by token never queues, or it could wait
		// behind waiters for a lock it holds itself.
		queued = cfg.tokenSet
		// stops undoes listen and join, last first.
		stops []func()
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// listen registers for release notifications of key (once): from then on
	// a release by any client, or by a goroutine of this Locker, wakes us.
	listen := func() bool {
		if wake != nil || cfg.pollingOnly {
			return false
		}
		var stop func()
		wake, stop = l.notify.wait(ctx, key, cfg.nodeTimeout)
		stops = append(stops, stop)
		return true
	}
	// join lines up behind the Locker's other waiters for key, listening
	// first: the subscription then lasts as long as the line, instead of
	// being dropped and taken again at every handoff.
	// It reports whether a retry is due at once: others were ahead (our
	// turn may come long after the release we missed), or we only now
	// started listening (the release may have come before that).
	join := func() (retryNow bool, err error) {
		listening := listen()
		leave, waited, err := l.gates.enter(ctx, key)
		if err != nil {
			return false, err
		}
		stops = append(stops, leave)
		queued = true
		return waited || listening, nil
	}
	defer func() {
		// The turn goes to the next in line before we stop listening.
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	// outlives reports whether, with WithFailFast, a holder that keeps the
	// key for d more makes waiting pointless: it outlives ctx's deadline.
	outlives := func(d time.Duration) bool {
		dl, has := ctx.Deadline()
		return cfg.failFast && has && time.Until(dl) < d
	}
	// notNow is the error when we gave up before asking the nodes: what
	// the line's latest round found, if it found anything, or contention
	// (we waited behind this Locker's own holder or waiters).
	notNow := func() error {
		if qe := l.gates.last(key); qe != nil {
			return qe
		}
		return &QuorumError{Op: "obtain", Key: key, Need: l.need, reason: ErrNotObtained}
	}
	if !queued && l.gates.busy(key) {
		if _, err := join(); err != nil {
			return nil, withContext(ctx, notNow())
		}
	}
	for {
		// A wake-up still pending from before this attempt is stale; drop
		// it, so that one found after the attempt means a release during or
		// after it (the channel holds one wake-up: a stale one would swallow
		// the real one).
		if wake != nil {
			select {
			case <-wake:
			default:
			}
		}
		// inLine: this call waits in the Locker's line for key (a re-entry
		// by token never does).
		inLine := queued && !cfg.tokenSet
		var (
			wait time.Duration
			left time.Duration
			held bool
		)
		if inLine {
			left, held = l.gates.heldFor(key, cfg.clock)
		}
		if held {
			// A goroutine of this Locker got the lock from this line and
			// has not released it: asking the nodes would only be refused.
			// Wait for its release (a handoff, or a poke) or, should it
			// vanish, for its validity to end.
			if err := l.closedErr(); err != nil {
				return nil, err
			}
			if !errors.Is(err, ErrNotObtained) {
				err = notNow() // else keep the last attempt's detail
			}
			if outlives(left) {
				return nil, err
			}
			wait = left
		} else {
			lock, aerr := l.attempt(ctx, key, &cfg)
			if errors.Is(aerr, errNotTried) && err != nil {
				// ctx ended just before this attempt: the last round
				// tells what kept the lock from us.
				return nil, withContext(ctx, err)
			}
			if aerr == nil {
				if inLine {
					l.gates.hold(key, lock.Until())
				}
				return lock, nil
			}
			err = aerr
			if errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) {
				return nil, err
			}
			var qe *QuorumError
			if queued && errors.As(err, &qe) {
				l.gates.note(key, qe)
			}
			if ctx.Err() != nil {
				return nil, withContext(ctx, err)
			}
			var ok bool
			if wait, ok = seq.Next(); !ok {
				return nil, err
			}
			if errors.Is(err, ErrNotObtained) && errors.As(err, &qe) {
				if free, known := qe.freeIn(); known {
					if outlives(free) {
						return nil, err
					}
					// No point sleeping past the moment enough keys expire.
					wait = min(wait, free+time.Millisecond)
				}
				retryNow := false
				if !queued {
					now, gerr := join()
					if gerr != nil {
						return nil, withContext(ctx, err)
					}
					retryNow = now
				}
				if listen() {
					// The release may have come before the subscription did.
					retryNow = true
				}
				if retryNow {
					continue
				}
			}
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		// The head of the line, waiting for a holder, offers itself for a
		// handoff: a Release by this Locker may give it the lock directly.
		var o *offer
		if queued && !cfg.tokenSet && errors.Is(err, ErrNotObtained) {
			o = &offer{cfg: &cfg, plan: newPlan(key, &cfg), done: make(chan handoffResult, 1), poke: make(chan struct{}, 1)}
			l.gates.post(key, o)
		}
		var (
			handed   handoffResult
			got, end bool
		)
		select {
		case <-ctx.Done():
			end = true
		case <-timer.C:
		case <-wake:
		case <-o.poked():
		case handed = <-o.channel():
			got = true
		}
		if o != nil && !got && !l.gates.withdraw(key, o) {
			// A Release claimed the offer: its round is under way.
			handed, got = <-o.done, true
		}
		if got {
			if ctx.Err() != nil {
				// A Release ran this round for us, perhaps only after ctx
				// ended (it claimed the offer before we could withdraw
				// it): an ended context obtains nothing, so it is undone.
				// An attempt of our own, by contrast, starts only with a
				// live ctx (see attempt).
				handed.res.OK = false
			}
			lock, herr := l.takeOver(ctx, key, &cfg, o, handed)
			if herr == nil {
				l.gates.hold(key, lock.Until())
				return lock, nil
			}
			if errors.Is(herr, ErrClosed) {
				return nil, herr
			}
			// The handoff failed (nodes out of reach, say); the key may
			// be free now: try again at once.
		}
		if end || ctx.Err() != nil {
			return nil, withContext(ctx, err)
		}
	}
}

// TryObtain makes exactly one attempt to acquire the lock on key, whatever
// the retry strategy. On failure it behaves as Obtain does.
//
// A ctx that has ended already asks no node and returns an error matching
// ctx.Err(). One that ends during the attempt does not cut it short: the
// node calls run on their own deadlines, and a lock granted by a majority
// with validity left is returned (see attempt).
func (l *Locker) TryObtain(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	cfg, err := l.callConfig(key, opts)
	if err != nil {
		return nil, err
	}
	lock, err := l.attempt(ctx, key, &cfg)
	if err != nil && ctx.Err() != nil {
		err = withContext(ctx, err)
	}
	return lock, err
}

// errNotTried marks the error of an acquisition that asked no node because
// its context had ended before it began.
var errNotTried = errors.New("redlock: context ended before any node was asked")

// notTried is the error of an acquisition of key whose ctx has ended before
// it asked any node. It matches ctx.Err(), and neither ErrNotObtained nor
// ErrNoQuorum: nothing is known of the nodes.
func notTried(ctx context.Context, key string) error {
	return fmt.Errorf("%w: obtain %q: %w", errNotTried, key, ctx.Err())
}

// withContext joins the context's error to err unless it is there already.
func withContext(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return &ctxError{err: err, ctx: cerr}
	}
	return err
}

// ctxError is errors.Join of an error and its context's, on one line: a
// message that a CLI or a log prints must not break in two.
type ctxError struct{ err, ctx error }

func (e *ctxError) Error() string   { return e.err.Error() + ": " + e.ctx.Error() }
func (e *ctxError) Unwrap() []error { return []error{e.err, e.ctx} }

// acquirePlan is what one acquisition sends: a fresh token (or the
// caller's) and the acquire script's keys and arguments.
type acquirePlan struct {
	token, prefix string
	keys          []string // the acquire script's KEYS
	lockKeys      []string // the lock key alone: what a release names
	args          []any
}

func newPlan(key string, cfg *config) acquirePlan {
	token := cfg.token
	if token == "" {
		// A fresh token per attempt: a straggler's clean-up from a failed
		// attempt can then never delete the key of a later one.
		token = uuid.NewString()
	}
	prefix := token + "\x00"
	value := prefix + "1\x00" + cfg.metadata
	keys := []string{key}
	args := []any{value, serverMillis(cfg.serverTTL()), prefix}
	if cfg.fencing || cfg.guard > 0 {
		keys = []string{key, fenceKey(key), guardMarker, guardQuarantine}
		fenced := "0"
		if cfg.fencing {
			fenced = "1"
		}
		args = append(args, fenced, serverMillis(cfg.guard), serverMillis(cfg.fenceLifetime()))
	}
	return acquirePlan{token: token, prefix: prefix, keys: keys, lockKeys: keys[:1], args: args}
}

// attempt is one quorum round of the acquire script, plus, with fencing, one
// round that writes the fence back.
//
// An ended ctx obtains nothing: attempt then asks no node. The node calls do
// not watch ctx (each runs on its own deadline, so that a round's undo and
// its stragglers' clean-up always reach the nodes), so a round started after
// ctx ended would still take the lock. A ctx that ends during the round does
// not undo it: a lock that a majority granted with validity left is
// returned, as a successful acquisition that raced the cancellation (the
// caller holds a lock it can release; undoing it would cost a round and
// gain nothing).
func (l *Locker) attempt(ctx context.Context, key string, cfg *config) (*Lock, error) {
	if ctx.Err() != nil {
		return nil, notTried(ctx, key)
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.mu.RUnlock()

	p := newPlan(key, cfg)
	// The closures take copies, so that p itself stays on the stack.
	lockKeys, prefix := p.lockKeys, p.prefix
	var (
		validity time.Duration
		late     settle
	)
	start := cfg.clock.Now()
	res := quorum.Run(ctx, &quorum.Round[int64]{
		Nodes:   len(l.nodes),
		Need:    l.need,
		Timeout: cfg.nodeTimeout,
		Start:   l.sender(cfg.nodeTimeout, acquireScript, p.keys, p.args, decodeAcquire, nil),
		// Validity is taken when the majority is in: that is the moment
		// the lock is granted, and the TTL has been running since the
		// first request reached a server.
		Accept: func(*quorum.Result[int64]) bool {
			validity = clock.Validity(cfg.ttl, cfg.clock.Since(start), cfg.driftFactor)
			return validity > 0
		},
		// A node that answers after the decision may have set the key (or
		// may have, if its reply was lost): if the attempt fails, release
		// it there as its reply arrives.
		Late: func(r quorum.Reply[int64], _ bool) {
			if undo(r.Vote, cfg.tokenSet) && late.releaseLater(r.Node) {
				l.releaseOn(r.Node, lockKeys, prefix, cfg.nodeTimeout)
			}
		},
		Background: &l.bg,
	})
	return l.conclude(ctx, key, cfg, &p, &res, start, validity, &late, "")
}

// conclude turns the round of an acquisition (an attempt's or a handoff's)
// into a Lock, after writing the fence back if fencing is on; or, when it
// failed, undoes the acquisition wherever it may have been applied,
// announcing the undo on channel unless it is "", and says why it failed.
// The caller holds l.enter, or a count on l.bg that keeps the node pipes
// open (a handoff's take-over after Close).
func (l *Locker) conclude(ctx context.Context, key string, cfg *config, p *acquirePlan, res *quorum.Result[int64],
	start time.Time, validity time.Duration, late *settle, channel string) (*Lock, error) {
	var (
		fence  uint64
		reason error
	)
	if res.OK && cfg.fencing {
		fence, validity, reason = l.writeBackFence(ctx, key, p.prefix, cfg, res, start)
	}
	if res.OK && reason == nil && misconfigured(res) {
		// A node was refused because it reaches another node's server:
		// say so now rather than hand out locks from a miscounted cluster
		// (the grant itself counted distinct servers only).
		reason = ErrInvalid
	}
	// A lock leaves here only while it is valid. The round may be concluded
	// well after its majority came in (a handoff's result waits for its
	// owner to take it over; the clock may jump): a lock whose Until has
	// passed would have its holder work past its validity. It fails as a
	// majority that came too late does (ErrNoQuorum), and is undone.
	if res.OK && reason == nil && cfg.clock.Now().Before(start.Add(validity)) {
		late.finish(false)
		return &Lock{
			l:      l,
			key:    key,
			keys:   p.lockKeys,
			token:  p.token,
			prefix: p.prefix,
			meta:   cfg.metadata,
			fence:  fence,
			cfg:    *cfg,
			until:  start.Add(validity),
		}, nil
	}

	// Failed: release on every node that granted or may have applied the
	// SET before its reply was lost, and on those that answer later.
	pending := late.finish(true)
	l.undoAll(ctx, cfg.nodeTimeout, p.lockKeys, p.prefix, channel, func(i int) bool {
		return undo(res.Replies[i].Vote, cfg.tokenSet) || slices.Contains(pending, i)
	})
	// Why, from the nodes' answers alone: a context that ended meanwhile
	// says nothing about the nodes, and an outage reported as contention
	// would tell a caller (a cron job's redlock run, say) that all is well.
	qe := l.quorumError("obtain", key, res, acquireOutcome)
	switch {
	case reason != nil:
		qe.reason = reason
	case res.No > len(l.nodes)-l.need:
		// Nodes held by another owner make a majority impossible, even
		// had every other node granted.
		qe.reason = ErrNotObtained
	default:
		// Nodes that failed or did not answer in time (with or without
		// some held by another), or a majority that came too late to
		// leave any validity: an outage, not contention.
		qe.reason = ErrNoQuorum
	}
	return nil, withContext(ctx, qe)
}

// settle tells the Late callback of an acquire round what to do with a
// straggler: while the attempt is undecided (the fence write-back may still
// fail it), stragglers are recorded; once it is, a failed attempt releases
// them.
type settle struct {
	mu      sync.Mutex
	done    bool
	failed  bool
	waiting []int
}

// releaseLater reports whether node must be released now; if the attempt is
// not settled yet, it records the node for finish instead.
func (s *settle) releaseLater(node int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.waiting = append(s.waiting, node)
		return false
	}
	return s.failed
}

// finish settles the attempt and returns the stragglers recorded so far.
func (s *settle) finish(failed bool) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done, s.failed = true, failed
	w := s.waiting
	s.waiting = nil
	return w
}

// writeBackFence takes the highest fence among the granting nodes and
// raises every node's counter to it, before the lock is handed out; a node
// where our token holds the key gets exactly the fence, so that a re-entry
// reads it back there (see fence.lua).
//
// Why this makes fences grow: a later holder needs a majority, which shares
// at least one node with the granting nodes that took the write-back. It can
// only be granted there once our key is gone, that is after our Release or
// expiry, both after this write-back; so its INCR there returns more than our
// fence, and its fence, a maximum, is larger still. This needs the write-back
// to reach a majority of granting nodes within the lock's validity, and nodes
// that keep their counters. Where a node lost its counter (it expired, or the
// node lost its memory, or a reload brought back an older one) the counter
// starts again from the server's clock, which is above our fence as long as
// that clock is not behind it by the counter's lifetime, or, under the
// restart guard, by the guard's maximum TTL: the time the node abstained
// since it last saw our fence (see acquire.lua).
func (l *Locker) writeBackFence(ctx context.Context, key, prefix string, cfg *config, acq *quorum.Result[int64], start time.Time) (uint64, time.Duration, error) {
	var fence int64
	granted := make([]bool, len(l.nodes))
	for i, r := range acq.Replies {
		if r.Vote == quorum.Yes {
			granted[i] = true
			fence = max(fence, r.Value)
		}
	}
	keys := []string{key, fenceKey(key)}
	args := []any{fence, serverMillis(cfg.fenceLifetime()), prefix}
	cmd := evalSha(fenceScript, keys, args)
	res := quorum.Run(ctx, &quorum.Round[int64]{
		Nodes:   len(l.nodes),
		Need:    l.need,
		Timeout: cfg.nodeTimeout,
		// Every node gets the fence (it costs nothing more and helps a node
		// that later rejoins a majority); only granting nodes count.
		Start: func(ctx context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
			decode := decodeBestEffort
			if granted[i] {
				decode = decodeDone
			}
			l.nodes[i].pipe.start(cfg.nodeTimeout, i, fenceScript, keys, args, cmd, decode, reply)
		},
		Background: &l.bg,
	})
	validity := clock.Validity(cfg.ttl, cfg.clock.Since(start), cfg.driftFactor)
	if !res.OK || validity <= 0 {
		return 0, 0, ErrNoQuorum
	}
	return uint64(fence), validity, nil
}

// misconfigured reports whether a node of the round was refused for a
// mistake of the caller's (it reaches another node's server).
func misconfigured(res *quorum.Result[int64]) bool {
	for _, r := range res.Replies {
		if r.Err != nil && errors.Is(r.Err, ErrInvalid) {
			return true
		}
	}
	return false
}

// decodeFunc turns a script's integer reply into a node's vote.
type decodeFunc = func(int64, error) (quorum.Vote, int64, error)

// startFunc is a quorum.Round's Start.
type startFunc = func(context.Context, int, func(int, quorum.Vote, int64, error))

// sender returns a round's Start that sends script s with keys and args to
// each node through its pipe, the command line built once for all nodes;
// started, if set, is called once the call is queued on every node.
func (l *Locker) sender(timeout time.Duration, s *script, keys []string, args []any, decode decodeFunc, started func()) startFunc {
	s, args = multiCall(s, keys, args) // a multi-key lock's release, extend, pttl
	cmd := evalSha(s, keys, args)
	last := len(l.nodes) - 1
	return func(_ context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
		l.nodes[i].pipe.start(timeout, i, s, keys, args, cmd, decode, reply)
		if started != nil && i == last {
			started()
		}
	}
}

// undo says whether a failed attempt must release a node that voted v. A
// node that granted must; so must one whose reply was an error, since the SET
// may have been applied with its reply lost, unless the token is the
// caller's own: then the key may be an earlier hold of the same owner
// (re-entry), which an undo must not take away; a lost re-entry costs at most
// one extra hold on that node until the TTL.
func undo(v quorum.Vote, ownToken bool) bool {
	return v == quorum.Yes || (v == quorum.Failed && !ownToken)
}

// decodeAcquire turns an acquire reply into a vote whose value is the fence
// (or 0, or the holds of a re-entry) when granted, the holder's PTTL when not.
func decodeAcquire(r int64, err error) (quorum.Vote, int64, error) {
	switch {
	case err != nil:
		return quorum.Failed, 0, err
	case r >= 0:
		return quorum.Yes, r, nil
	}
	return quorum.No, -r - 2, nil // the holder's PTTL, -1 without expiry
}

// undoAll releases key on the nodes for which which(i) holds, in parallel
// through the nodes' pipes, and waits for them up to timeout; it announces
// the release on channel unless that is "". It undoes our own writes, so it
// runs even when ctx has ended.
func (l *Locker) undoAll(ctx context.Context, timeout time.Duration, keys []string, prefix, channel string, which func(int) bool) {
	send := l.sender(timeout, releaseScript, keys, undoArgs(prefix, channel), decodeAny, nil)
	quorum.Run(context.WithoutCancel(ctx), &quorum.Round[int64]{
		Nodes:   len(l.nodes),
		Need:    len(l.nodes),
		Timeout: timeout,
		Start: func(ctx context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
			if !which(i) {
				reply(i, quorum.Yes, 0, nil)
				return
			}
			// Best effort: a key left behind on an unreachable node expires
			// by its TTL; it delays others but never breaks exclusion.
			send(ctx, i, reply)
		},
		Background: &l.bg,
	})
}

// decodeAny counts any answer, even an error, as done.
func decodeAny(r int64, _ error) (quorum.Vote, int64, error) { return quorum.Yes, r, nil }

// decodeDone is Yes on success, Failed on error.
func decodeDone(r int64, err error) (quorum.Vote, int64, error) {
	if err != nil {
		return quorum.Failed, 0, err
	}
	return quorum.Yes, r, nil
}

// decodeBestEffort is No whatever happened: the call does not count.
func decodeBestEffort(int64, error) (quorum.Vote, int64, error) { return quorum.No, 0, nil }

// undoArgs are the release script's arguments that undo an attempt's own
// write, announced on channel unless it is "". An attempt's undo announces
// nothing: no lock was held that anyone waits for, and waking waiters (the
// failed client among them) would only start another round.
func undoArgs(prefix, channel string) []any { return []any{prefix, channel, 0} }

// releaseOn queues the undo of our write on one node, outside of any round,
// with its own timeout, whatever became of the caller. It does not wait; the
// Locker's background group tracks it. Best effort: a key left behind on an
// unreachable node expires by its TTL and only delays others, it never
// breaks mutual exclusion.
func (l *Locker) releaseOn(i int, keys []string, prefix string, timeout time.Duration) {
	l.bg.Add(1) // called with a count held on bg (by a straggling call)
	l.sender(timeout, releaseScript, keys, undoArgs(prefix, ""), decodeAny, nil)(context.Background(), i,
		func(int, quorum.Vote, int64, error) { l.bg.Done() })
}

// decodeCompare turns a compare-and-X reply into a vote: Yes where our
// token held the key, No (with replyGone or replyOther) where it did not.
func decodeCompare(r int64, err error) (quorum.Vote, int64, error) {
	switch {
	case err != nil:
		return quorum.Failed, 0, err
	case r == replyOurs:
		return quorum.Yes, r, nil
	case r == replyGone || r == replyOther:
		return quorum.No, r, nil
	}
	return quorum.Failed, 0, fmt.Errorf("redlock: unexpected reply %d", r)
}

// acquireOutcome maps an acquire reply to a node outcome; the value of a No
// is the holder's PTTL.
func acquireOutcome(r quorum.Reply[int64]) NodeResult {
	switch r.Vote {
	case quorum.Yes:
		return NodeResult{Outcome: OutcomeOK}
	case quorum.No:
		ttl := time.Duration(r.Value) * time.Millisecond
		if r.Value < 0 {
			ttl = -1
		}
		return NodeResult{Outcome: OutcomeHeldByOther, TTL: ttl}
	case quorum.Failed:
		return NodeResult{Outcome: OutcomeError, Err: r.Err}
	}
	return NodeResult{Outcome: OutcomeNoReply}
}

// compareOutcome maps a compare-and-X reply to a node outcome.
func compareOutcome(r quorum.Reply[int64]) NodeResult {
	switch r.Vote {
	case quorum.Yes:
		return NodeResult{Outcome: OutcomeOK}
	case quorum.No:
		if r.Value == replyOther {
			return NodeResult{Outcome: OutcomeHeldByOther, TTL: -1}
		}
		return NodeResult{Outcome: OutcomeMissing}
	case quorum.Failed:
		return NodeResult{Outcome: OutcomeError, Err: r.Err}
	}
	return NodeResult{Outcome: OutcomeNoReply}
}

func (l *Locker) quorumError(op, key string, res *quorum.Result[int64], outcome func(quorum.Reply[int64]) NodeResult) *QuorumError {
	qe := &QuorumError{Op: op, Key: key, Need: l.need, Nodes: make([]NodeResult, len(l.nodes))}
	for i, r := range res.Replies {
		nr := outcome(r)
		nr.Addr = l.nodes[i].addr
		qe.Nodes[i] = nr
	}
	return qe
}

// notHeld classifies a failed release, extend or TTL round: an outage that
// hides a possible majority is ErrNoQuorum; otherwise the lock is not ours on
// a majority, lost if another owner holds it anywhere, else expired.
func (l *Locker) notHeld(op, key string, res *quorum.Result[int64]) *QuorumError {
	qe := l.quorumError(op, key, res, compareOutcome)
	if res.Yes+res.Failed+res.Pending() >= l.need {
		qe.reason = ErrNoQuorum
		return qe
	}
	qe.reason = ErrLockExpired
	for _, n := range qe.Nodes {
		if n.Outcome == OutcomeHeldByOther {
			qe.reason = ErrLockLost
		}
	}
	return qe
}

// decodeBootstrap is Yes when the node has its marker, Failed when it
// abstains: an ABSTAIN error reply (a marker from another server run, or an
// evicting maxmemory-policy) or a quarantine still running.
func decodeBootstrap(n int64, err error) (quorum.Vote, int64, error) {
	switch {
	case err != nil:
		return quorum.Failed, 0, err
	case n < 0:
		return quorum.Failed, 0, fmt.Errorf("redlock: node abstains for %v more: it lost its memory (flush, restart, reload, promotion or eviction)", time.Duration(-n)*time.Millisecond)
	}
	return quorum.Yes, n, nil
}

// Bootstrap seeds the restart guard's memory marker on every node, so that a
// fresh cluster votes at once instead of abstaining for the guard's maximum
// TTL. The marker is stamped with the server's run_id and evicted-keys count,
// as the acquire script stamps it. Run it once, when the cluster is first set
// up, never on a cluster whose nodes may have lost locks that are still held
// and with them their markers (a restart without persistence, a flush): that
// would let a forgetful node vote again at once, which is what the guard
// prevents. A node that already has its marker with the current stamp is
// left as it is, and so is a node that already noticed a loss and abstains
// (its quarantine protects the locks it forgot).
//
// A marker with another stamp is a loss, never a fresh node: the server
// restarted (reloading the marker from a snapshot or AOF), is a promoted
// replica, or evicted keys, since it was stamped. Bootstrap does not clear
// it: when the Locker has WithRestartGuard it starts the node's quarantine
// now; without it, it leaves the marker for the first guarded acquisition to
// notice. Either way the node is reported as abstaining. A node whose
// maxmemory-policy may evict keys is reported too.
//
// It fails with an error matching ErrNoQuorum, naming the nodes, unless every
// node was reached and none abstains.
func (l *Locker) Bootstrap(ctx context.Context) error {
	if err := l.enter(); err != nil {
		return err
	}
	defer l.mu.RUnlock()
	keys := []string{guardMarker, guardQuarantine}
	args := []any{max(l.cfg.guard, 0).Milliseconds()}
	timeout := l.cfg.nodeTimeout
	res := quorum.Run(ctx, &quorum.Round[int64]{
		Nodes:      len(l.nodes),
		Need:       len(l.nodes),
		Timeout:    timeout,
		WaitAll:    true,
		Start:      l.sender(timeout, bootstrapScript, keys, args, decodeBootstrap, nil),
		Background: &l.bg,
	})
	if res.OK {
		return nil
	}
	qe := l.quorumError("bootstrap", "", &res, compareOutcome)
	qe.reason = ErrNoQuorum
	return withContext(ctx, qe)
}
