package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy is a TCP proxy in front of one server, where the network faults
// act: a partition (every byte dropped both ways, connections left open),
// lost replies, latency, connection resets, and isolation (listener and
// connections closed, new ones refused).
//
// It is built for a client that reconnects often: every accepted
// connection gets its own goroutine at once, and the upstream is dialled
// only when the client has sent something. A proxy whose accept loop dials
// the upstream itself (toxiproxy's) falls behind under a reconnection storm
// on a busy machine and never catches up: its accept queue fills with
// connections whose clients gave up long ago, each still dialled and set up
// in turn, while the clients keep opening new ones.
type proxy struct {
	mu       sync.Mutex
	addr     string // the listen address, fixed by the first start
	upstream string
	ln       net.Listener // nil while stopped
	conns    map[*proxyConn]struct{}
	// faults is the current set of faults; a new value replaces it (never
	// changed in place) and closes the old one's changed channel, so that
	// data held back by latency sees the change.
	faults atomic.Pointer[netFaults]
	wg     sync.WaitGroup
}

// netFaults is a set of network faults.
type netFaults struct {
	// blackhole drops every byte both ways; dropReplies the bytes from
	// the server.
	blackhole, dropReplies bool
	// reset resets (TCP RST) a connection as soon as the client sends
	// data.
	reset bool
	// latency ± jitter delays every chunk of data both ways.
	latency, jitter time.Duration
	// changed is closed when these faults are replaced.
	changed chan struct{}
}

// proxyConn is one client connection and its upstream.
type proxyConn struct {
	client net.Conn
	mu     sync.Mutex
	server net.Conn // nil until dialled
	closed bool
}

// newProxy starts a proxy on a free loopback port in front of upstream.
func newProxy(upstream string) (*proxy, error) {
	p := &proxy{addr: "127.0.0.1:0", upstream: upstream, conns: make(map[*proxyConn]struct{})}
	p.faults.Store(&netFaults{changed: make(chan struct{})})
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Addr returns the address clients connect to.
func (p *proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// start listens (again) on the proxy's address; it does nothing when the
// proxy is listening already.
func (p *proxy) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return fmt.Errorf("proxy for %s: %w", p.upstream, err)
	}
	p.ln, p.addr = ln, ln.Addr().String()
	p.wg.Go(func() { p.accept(ln) })
	return nil
}

// stop closes the listener and every connection: new connections are
// refused until start.
func (p *proxy) stop() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	conns := p.conns
	p.conns = make(map[*proxyConn]struct{})
	p.mu.Unlock()
	if ln != nil {
		_ = ln.Close() // ours alone; accept returns
	}
	for c := range conns {
		c.close(false)
	}
}

// close stops the proxy and waits for its goroutines.
func (p *proxy) close() {
	p.stop()
	p.wg.Wait()
}

// setUpstream points the proxy at another server and cuts the
// connections to the old one.
func (p *proxy) setUpstream(upstream string) {
	p.mu.Lock()
	p.upstream = upstream
	conns := p.conns
	p.conns = make(map[*proxyConn]struct{})
	p.mu.Unlock()
	for c := range conns {
		c.close(false)
	}
}

// update changes the proxy's faults with change (setting the zero value
// heals them all).
func (p *proxy) update(change func(f *netFaults)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := *p.faults.Load()
	change(&f)
	f.changed = make(chan struct{})
	old := p.faults.Swap(&f)
	close(old.changed)
}

func (p *proxy) accept(ln net.Listener) {
	for {
		client, err := ln.Accept()
		if err != nil {
			return // closed by stop
		}
		c := &proxyConn{client: client}
		p.mu.Lock()
		if p.ln != ln {
			p.mu.Unlock()
			_ = client.Close()
			return
		}
		p.conns[c] = struct{}{}
		upstream := p.upstream
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c, upstream) })
	}
}

// serve forwards one connection: the upstream is dialled once the client
// has sent its first bytes, so a connection whose client already left
// costs nothing upstream.
func (p *proxy) serve(c *proxyConn, upstream string) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	n, err := c.client.Read(buf)
	if err != nil {
		c.close(false)
		return
	}
	server, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		c.close(false)
		return
	}
	if !c.setServer(server) {
		return
	}
	p.wg.Go(func() { p.pump(c, server, c.client, false, nil) })
	p.pump(c, c.client, server, true, buf[:n])
}

// setServer records the upstream connection; it reports false (and closes
// it) when the connection was closed meanwhile.
func (c *proxyConn) setServer(server net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = server.Close()
		return false
	}
	c.server = server
	return true
}

// close closes both sides, with a TCP RST when reset is true.
func (c *proxyConn) close(reset bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	for _, conn := range []net.Conn{c.client, c.server} {
		if conn == nil {
			continue
		}
		if tc, ok := conn.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// pump copies from src to dst, through the faults, until either side
// fails; then it closes both. up is the direction from the client to the
// server; first is data already read from src.
func (p *proxy) pump(c *proxyConn, src, dst net.Conn, up bool, first []byte) {
	buf := make([]byte, 32<<10)
	chunk := first
	for {
		if len(chunk) > 0 {
			if !p.forward(c, dst, up, chunk, time.Now()) {
				return
			}
		}
		n, err := src.Read(buf)
		if err != nil {
			c.close(false)
			return
		}
		chunk = buf[:n]
	}
}

// forward passes one chunk read at arrived through the current faults,
// and reports whether the connection is still open.
func (p *proxy) forward(c *proxyConn, dst net.Conn, up bool, chunk []byte, arrived time.Time) bool {
	for {
		f := p.faults.Load()
		switch {
		case f.reset && up:
			c.close(true)
			return false
		case f.blackhole, f.dropReplies && !up:
			return true // dropped
		}
		if f.latency > 0 {
			delay := f.latency
			if f.jitter > 0 {
				delay += time.Duration(rand.Int64N(int64(2*f.jitter))) - f.jitter
			}
			if wait := time.Until(arrived.Add(delay)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-f.changed:
					// The faults changed while the chunk waited: it
					// goes through the new ones.
					t.Stop()
					continue
				}
			}
		}
		if _, err := dst.Write(chunk); err != nil {
			c.close(false)
			return false
		}
		return true
	}
}
