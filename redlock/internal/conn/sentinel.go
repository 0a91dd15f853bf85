package conn

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Sentinel group as one node: every call goes to the master that the
// group's sentinels name, through a Pipe of that master's, so a group's
// calls are batched, identified and guarded exactly as a standalone
// master's. The link asks the sentinels itself, on connections of its own
// (never through a go-redis failover client, whose switches happen in its
// own pool and would not reach the Locker's connections): at the first
// call, when a sentinel announces a switch (+switch-master), when a call
// of the link fails on its connection or reaches a replica, and every
// watchEvery. When the sentinels name another master, new calls go to the
// new master's pipe and the old master's pipe is retired (see retire.go):
// what it holds unsent is answered ErrDemoted, its connections close. A
// demoted master may stay a writable master for seconds; it gets no call
// of this link from the switch on.
//
// Why the link routes rather than each call asking Sentinel: asking before
// every call would double the calls' round trips and tie every vote to the
// sentinels' answering. Instead, a server votes only while it is the last
// master the link heard the sentinels name, and only while it says it is
// a master (checked when each connection opens, see masterRole): a server
// that a later failover, not yet seen, made a replica refuses our writes
// (READONLY) or our connections. What remains is the time the link takes
// to hear of a switch (a message's delivery; watchEvery if the message is
// lost): the restart guard covers it, since the promoted replica abstains
// for the maximum TTL (docs/safety.md), and min-replicas-to-write on the
// servers shortens the time the demoted master takes writes at all.
const (
	// watchEvery is how often the link asks the sentinels even with no
	// switch announced: an announcement may be lost with its connection.
	watchEvery = time.Second
	// watchGap is the least time between two askings: a burst of failed
	// calls asks once.
	watchGap = 50 * time.Millisecond
	// switchChannel is where a sentinel announces a new master.
	switchChannel = "+switch-master"
)

// Sentinel is the link of a Sentinel group node.
type Sentinel struct {
	// masterPipes are the masters' pipes, kept until Close (a call may
	// be on its way to a retired one); its mu also guards pending.
	masterPipes
	opts  *redis.FailoverOptions
	setup time.Duration

	// cur is the pipe of the master the sentinels name, nil until they
	// were first asked: the one load a call makes (Start).
	cur atomic.Pointer[Pipe]
	// sentinels are the link's own clients of the sentinels, in the
	// order given; sub is the release subscription's client, which dials
	// the named master at each (re)connection.
	sentinels []*redis.Client
	sub       *redis.Client

	// switchMu makes one switch at a time (the watcher's, Masters').
	switchMu sync.Mutex
	// pending are the calls made before the sentinels were first asked.
	pending []*Call
	kick    chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup
}

// NewSentinel returns the link of the group that opts name (MasterName,
// SentinelAddrs), with the Locker's node timeout, the route of go-redis's
// lines and the node's identity handle, which every master's pipe shares.
// It starts the goroutine that watches the sentinels, which asks them at
// once; Close ends it.
func NewSentinel(opts *redis.FailoverOptions, timeout time.Duration, route *Route, ident *Identity) *Sentinel {
	s := &Sentinel{
		masterPipes: newMasterPipes(timeout, route, ident),
		opts:        opts, setup: max(opts.DialTimeout, timeout),
		kick: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	for _, addr := range opts.SentinelAddrs {
		// Bounded like a subscription's: reads and writes that no
		// deadline of ours bounds (a subscription's pings) get timeout.
		_, o := ClientOptions(SentinelOptions(opts, addr), timeout)
		o.Dialer = routeDial(o.Dialer, route)
		s.sentinels = append(s.sentinels, redis.NewClient(o))
	}
	_, sub := ClientOptions(SentinelMasterOptions(opts, "sentinel-"+opts.MasterName), timeout)
	sub.ReadTimeout = s.setup
	dial := sub.Dialer
	sub.Dialer = routeDial(func(ctx context.Context, network, _ string) (net.Conn, error) {
		p := s.cur.Load()
		if p == nil {
			s.refresh()
			return nil, errNoMasterYet
		}
		return dial(ctx, network, p.addr)
	}, route)
	s.sub = redis.NewClient(sub)
	s.wg.Add(1)
	go s.watch()
	return s
}

// errNoMasterYet fails a subscription made before the sentinels answered.
var errNoMasterYet = errors.New("redlock: no sentinel has named the group's master yet")

// Start sends c to the pipe of the master the sentinels named last; a call
// made before they answered waits for their first answer.
func (s *Sentinel) Start(c *Call, inline bool) {
	if p := s.cur.Load(); p != nil {
		p.Start(c, inline)
		return
	}
	s.mu.Lock()
	if p := s.cur.Load(); p != nil {
		s.mu.Unlock()
		p.Start(c, inline)
		return
	}
	s.pending = append(s.pending, c)
	s.mu.Unlock()
	s.refresh()
}

// refresh asks the watcher to ask the sentinels, without waiting.
func (s *Sentinel) refresh() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// watch asks the sentinels at once, then whenever a reason comes (see
// wait), at most once per watchGap, until Close.
func (s *Sentinel) watch() {
	defer s.wg.Done()
	every := time.NewTicker(watchEvery)
	defer every.Stop()
	gap := time.NewTimer(0)
	defer gap.Stop()
	var feed switchFeed
	defer feed.close()
	for {
		addr, answered, err := s.ask(context.Background())
		if err != nil {
			s.failPending(err)
		} else {
			s.adopt(addr)
		}
		feed.follow(s.sentinels, answered)
		gap.Reset(watchGap)
		select {
		case <-s.done:
			return
		case <-gap.C:
		}
		if !s.wait(every.C, feed.msgs) {
			return
		}
	}
}

// wait blocks until the sentinels are to be asked again: a call asked for
// it (refresh), watchEvery passed, or a sentinel announced a new master of
// this group. It reports false when the link closes.
func (s *Sentinel) wait(every <-chan time.Time, msgs <-chan *redis.Message) bool {
	for {
		select {
		case <-s.done:
			return false
		case <-s.kick:
			return true
		case <-every:
			return true
		case m, ok := <-msgs:
			// "<name> <old ip> <old port> <new ip> <new port>"
			if !ok || strings.HasPrefix(m.Payload, s.opts.MasterName+" ") {
				return true
			}
		}
	}
}

// adopt makes the master at addr the one that votes: new calls go to its
// pipe, then the pipe of the master named before is retired.
func (s *Sentinel) adopt(addr string) {
	s.switchMu.Lock()
	defer s.switchMu.Unlock()
	old := s.cur.Load()
	if old != nil && old.addr == addr {
		return
	}
	p := s.pipe(addr)
	p.restore()
	s.cur.Store(p)
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, c := range pending {
		p.Start(c, false)
	}
	if old != nil {
		// After the store: a call that loaded the old pipe before it
		// is answered ErrDemoted there, never sent.
		old.retire()
	}
}

// failPending fails the calls waiting for the sentinels' first answer.
func (s *Sentinel) failPending(err error) {
	s.mu.Lock()
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, c := range pending {
		c.fail(err)
	}
}

// pipe returns the pipe of the master at addr, made when first named: a
// failed call on it makes the link ask the sentinels again, and each of
// its connections votes only while its server says it is a master.
func (s *Sentinel) pipe(addr string) *Pipe {
	return s.masterPipes.pipe(addr, SentinelMasterOptions(s.opts, addr), func(p *Pipe) {
		p.redirected = s.refresh
		p.role.only = true
	})
}

// Close stops watching the sentinels, fails the calls still waiting for
// their first answer, and closes every master's pipe once drained. No
// call may start after it.
func (s *Sentinel) Close() {
	close(s.done)
	s.wg.Wait()
	s.failPending(ErrShed)
	s.masterPipes.close()
	for _, c := range s.sentinels {
		_ = c.Close() // ours alone
	}
	_ = s.sub.Close() // ours alone
}

// WithCause adds why the named master's last connection attempt failed.
func (s *Sentinel) WithCause(err error) error {
	if p := s.cur.Load(); p != nil {
		return p.WithCause(err)
	}
	return err
}

// Replica reports whether the named master said it was a replica.
func (s *Sentinel) Replica() bool {
	p := s.cur.Load()
	return p != nil && p.Replica()
}

// Sub is the client of the node's release subscription. A subscription
// outlives a switch until it reconnects; it carries no vote, and the old
// master, once a replica, passes the new one's announcements on.
func (s *Sentinel) Sub() *redis.Client { return s.sub }

// SetUp is how long a new connection may take to come up.
func (s *Sentinel) SetUp() time.Duration { return s.setup }

// Masters returns the named master's own client, asking the sentinels
// first if nobody did yet.
func (s *Sentinel) Masters(ctx context.Context) ([]*redis.Client, error) {
	if s.cur.Load() == nil {
		addr, _, err := s.ask(ctx)
		if err != nil {
			return nil, err
		}
		s.adopt(addr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return []*redis.Client{s.cur.Load().own}, nil
}

// Hold stops the worker of key's queue on the named master's pipe (for
// tests); it does nothing before the sentinels answered.
func (s *Sentinel) Hold(key string) (letGo func()) {
	if p := s.cur.Load(); p != nil {
		return p.Hold(key)
	}
	return func() {}
}

// Master is the address of the master the link sends to, "" before the
// sentinels answered (for tests).
func (s *Sentinel) Master() string {
	if p := s.cur.Load(); p != nil {
		return p.addr
	}
	return ""
}
