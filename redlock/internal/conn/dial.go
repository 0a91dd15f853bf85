package conn

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
)

// A worker dials its connection itself and hands the socket to go-redis as
// the dial of the pool's next connection. A go-redis pool counts its failed
// dials over its whole life; once it has counted as many as it has room for,
// it stops dialling and probes the server only once a second, so a node back
// from a long outage stayed out of every vote for up to a second after it
// accepted connections again. A worker's failed dial never reaches the pool:
// the pool counts none, and a node votes again in the first batch the
// worker tries after it comes back (at most refuseMax later, see refused).
// The connection's set-up (open) is go-redis's and ours as
// before; only where its socket comes from changes.

// dialFunc is a dialer of the lock's connections.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// spares holds the sockets the workers dialled for the pool's next dials.
type spares struct {
	mu    sync.Mutex
	conns []net.Conn
}

// offer makes c a dial of the pool's. The returned func takes c back and
// closes it if no dial of the pool's took it (the pool had an idle
// connection for the worker); the worker calls it once its connection is
// set up or has failed.
func (s *spares) offer(c net.Conn) (takeBack func()) {
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if i := slices.Index(s.conns, c); i >= 0 {
			s.conns = slices.Delete(s.conns, i, i+1)
			_ = c.Close() // never used: nothing to report
		}
	}
}

// dialer returns the pool's dialer: it takes an offered socket, the oldest
// first (they are all alike), or dials with dial when none is on offer (a
// call outside the queues, see Pipe.Client).
func (s *spares) dialer(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.mu.Lock()
		if len(s.conns) > 0 {
			c := s.conns[0]
			s.conns = slices.Delete(s.conns, 0, 1)
			s.mu.Unlock()
			return c, nil
		}
		s.mu.Unlock()
		return dial(ctx, network, addr)
	}
}

// connect gives the worker a new connection: it dials the node within ctx's
// deadline, then sets the connection up on that socket (see open). On
// failure the worker has no connection and the error is the batch's; a
// failed dial is the node's last cause, and its line goes where go-redis's
// lines about the node's connections go (see Route). Close ends a set-up
// at once (see setups), unless it began after Close did.
func (w *worker) connect(ctx context.Context) error {
	p := w.p
	if err := p.ident.refusedErr(); err != nil {
		return err // no dial: the node is out of every vote for good
	}
	if !p.setups.closing() {
		ctx = setupCtx{Context: ctx, done: p.setups.done}
	}
	c, err := p.dial(ctx, p.network, p.addr)
	if err != nil {
		err = p.checkTLS(err)
		p.cause.note(err)
		if to := p.route.To; to != nil {
			// The line go-redis writes for a failed dial of its own.
			to.Printf(ctx, "redis: connection pool: failed to dial after %d attempts: %v", 1, err)
		}
		return err
	}
	defer p.spares.offer(c)()
	if _, ok := ctx.(setupCtx); ok {
		if !p.setups.add(c) {
			return errSetUpEnded
		}
		defer p.setups.remove(c)
	}
	return w.open(ctx)
}

// errSetUpEnded fails a batch whose connection's set-up Close ended.
var errSetUpEnded = errors.New("redlock: the connection's set-up was ended by Close")

// setups are the sockets of the connections being set up. A set-up may take
// the client's DialTimeout (see send), and Close must not wait that long:
// it ends them all at once, and the dials under way.
type setups struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	done   chan struct{} // closed by end
	closed bool
}

// add notes c as being set up; it reports false (and closes c) once end
// was called.
func (s *setups) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close() // never used: nothing to report
		return false
	}
	if s.conns == nil {
		s.conns = make(map[net.Conn]struct{})
	}
	s.conns[c] = struct{}{}
	return true
}

// remove notes that c's set-up is over.
func (s *setups) remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// closing reports whether end was called.
func (s *setups) closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// end stops every dial and set-up under way: their sockets are closed.
func (s *setups) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	close(s.done)
	for c := range s.conns {
		_ = c.Close() // the set-up fails on it; nothing else to report
	}
}

// setupCtx is a set-up's context: the worker's, ended early by Close.
type setupCtx struct {
	context.Context
	done <-chan struct{}
}

func (c setupCtx) Done() <-chan struct{} { return c.done }

func (c setupCtx) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return c.Context.Err()
	}
}

// subDialer is the dialer of the subscription client (see Pipe.Sub). Its
// connections get the same budget as the workers' (setup): go-redis dials
// and sets them up on its own, with no deadline of ours, so a budget of the
// node timeout would never let a slow node's subscription come up. It
// holds the subscription's lock meanwhile, which Close needs, so Close
// ends these too: EndSetUps ends the dial, and closes the sockets this
// dialer made that are still open.
func (p *Pipe) subDialer(dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p.setups.closing() {
			return nil, errSetUpEnded
		}
		ctx, cancel := context.WithTimeout(setupCtx{Context: ctx, done: p.setups.done}, p.setup)
		defer cancel()
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if !p.setups.add(c) {
			return nil, errSetUpEnded
		}
		return &subConn{Conn: c, s: &p.setups}, nil
	}
}

// subConn is a socket of the subscription client, kept in the set-ups
// until it closes.
type subConn struct {
	net.Conn
	s *setups
}

func (c *subConn) Close() error {
	c.s.remove(c.Conn)
	return c.Conn.Close()
}
