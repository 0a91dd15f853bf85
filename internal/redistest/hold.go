package redistest

import (
	"errors"
	"net"
	"sync"
)

// Holder is a TCP forwarder to a server that can hold up what clients send
// on the connections open at a given moment, as a slow or congested network
// path would: Hold keeps their bytes in the forwarder, while connections
// opened later pass freely; Free lets the held bytes go on. A connection
// that the server ends meanwhile (CLIENT KILL) loses its held bytes: they
// never reach the server.
type Holder struct {
	// Addr is the forwarder's own address.
	Addr string

	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond // signalled when a pair is freed or ended
	pairs  map[*heldPair]struct{}
	closed bool
}

type heldPair struct {
	client, server net.Conn
	held           bool
	ended          bool
	pending        int // bytes read from the client, not yet written or dropped
}

// Hold starts a forwarder to target (host:port).
func Hold(target string) (*Holder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &Holder{Addr: ln.Addr().String(), target: target, ln: ln, pairs: map[*heldPair]struct{}{}}
	h.cond = sync.NewCond(&h.mu)
	h.wg.Add(1)
	go h.accept()
	return h, nil
}

func (h *Holder) accept() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", h.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p := &heldPair{client: c, server: up}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		h.pairs[p] = struct{}{}
		h.mu.Unlock()
		h.wg.Add(2)
		go h.upstream(p)
		go h.downstream(p)
	}
}

// upstream copies what the client sends, waiting while the pair is held.
func (h *Holder) upstream(p *heldPair) {
	defer h.wg.Done()
	defer h.end(p)
	buf := make([]byte, 32<<10)
	for {
		n, err := p.client.Read(buf)
		if n > 0 {
			h.mu.Lock()
			p.pending += n
			for p.held && !p.ended {
				h.cond.Wait()
			}
			ended := p.ended
			h.mu.Unlock()
			if ended {
				h.drop(p, n)
				return
			}
			_, werr := p.server.Write(buf[:n])
			h.drop(p, n)
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (h *Holder) drop(p *heldPair, n int) {
	h.mu.Lock()
	p.pending -= n
	h.cond.Broadcast()
	h.mu.Unlock()
}

// downstream copies the server's replies to the client.
func (h *Holder) downstream(p *heldPair) {
	defer h.wg.Done()
	defer h.end(p)
	buf := make([]byte, 32<<10)
	for {
		n, err := p.server.Read(buf)
		if n > 0 {
			if _, werr := p.client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// end closes both sides of a pair, as a proxy does when one side ends.
func (h *Holder) end(p *heldPair) {
	h.mu.Lock()
	p.ended = true
	h.cond.Broadcast()
	h.mu.Unlock()
	_ = p.client.Close()
	_ = p.server.Close()
}

// Hold holds up the bytes sent from now on over every connection open now.
func (h *Holder) Hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.pairs {
		p.held = true
	}
}

// Free lets the held connections go on, and waits until every byte they
// held has been written to the server, or dropped because the connection
// ended.
func (h *Holder) Free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p := range h.pairs {
		p.held = false
	}
	h.cond.Broadcast()
	for {
		pending := 0
		for p := range h.pairs {
			pending += p.pending
		}
		if pending == 0 {
			return
		}
		h.cond.Wait()
	}
}

// Close stops the forwarder and ends its connections.
func (h *Holder) Close() error {
	h.mu.Lock()
	h.closed = true
	for p := range h.pairs {
		p.ended = true
		_ = p.client.Close()
		_ = p.server.Close()
	}
	h.cond.Broadcast()
	h.mu.Unlock()
	err := h.ln.Close()
	h.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
