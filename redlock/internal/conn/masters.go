package conn

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// masterPipes are the pipes of the masters of a node that has several
// (a Cluster's, a Sentinel group's over time), by address: each made when
// its master is first named, with the node's timeout, route and identity
// handle (which every master's pipe shares: a master reached by two nodes
// fails the second one's calls), and kept until Close, since a call may
// still be on its way to a master the node no longer names. mu also
// guards the state of the link that embeds it.
type masterPipes struct {
	timeout time.Duration
	route   *Route
	ident   *Identity
	// fn is set once the guard's function library is in use: a pipe made
	// later loads it too.
	fn atomic.Bool

	mu    sync.Mutex
	pipes map[string]*Pipe
	// carriers hold each master's options (NewPipe makes its clients
	// from them); they never connect.
	carriers []*redis.Client
}

// newMasterPipes returns an empty set of a node's master pipes.
func newMasterPipes(timeout time.Duration, route *Route, ident *Identity) masterPipes {
	return masterPipes{timeout: timeout, route: route, ident: ident, pipes: map[string]*Pipe{}}
}

// pipe returns the pipe of the master at addr. One not made yet is made
// from opts (the options of a client of addr) and given the link's hooks
// by ready before any call reaches it.
func (m *masterPipes) pipe(addr string, opts *redis.Options, ready func(*Pipe)) *Pipe {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pipes[addr]; ok {
		return p
	}
	carrier := redis.NewClient(opts)
	m.carriers = append(m.carriers, carrier)
	p := NewPipe(carrier, m.timeout, m.route, m.ident)
	ready(p)
	if m.fn.Load() {
		p.UseFunctions()
	}
	m.pipes[addr] = p
	return p
}

// each calls f on every master's pipe made so far.
func (m *masterPipes) each(f func(*Pipe)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pipes {
		f(p)
	}
}

// UseFunctions makes every master's new connections load the guard's
// function library (see Pipe.UseFunctions).
func (m *masterPipes) UseFunctions() {
	m.fn.Store(true)
	m.each((*Pipe).UseFunctions)
}

// EndSetUps ends the masters' set-ups under way.
func (m *masterPipes) EndSetUps() { m.each((*Pipe).EndSetUps) }

// close closes every master's pipe once drained, and the carriers. No
// call may start after it.
func (m *masterPipes) close() {
	m.each((*Pipe).Close)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.carriers {
		_ = c.Close() // never connected: they carry options only
	}
}
