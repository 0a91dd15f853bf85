package redistest

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Forwarder is a plain TCP forwarder on a loopback port of its own: a second
// address for the same server, as a proxy, a load balancer or a DNS alias
// would give.
type Forwarder struct {
	// Addr is the forwarder's own address.
	Addr string

	target string
	ln     net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Forward starts a forwarder to target (host:port).
func Forward(target string) (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Forwarder{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

func (f *Forwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", f.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !f.track(c, up) {
			return
		}
		f.wg.Add(2)
		go f.pipe(up, c)
		go f.pipe(c, up)
	}
}

// track records a connection pair; false once the forwarder is closed.
func (f *Forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *Forwarder) pipe(dst, src net.Conn) {
	defer f.wg.Done()
	_, _ = io.Copy(dst, src)
	// One side ended: end both, as a proxy does.
	_ = dst.Close()
	_ = src.Close()
}

// Close stops the forwarder and ends its connections.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	err := f.ln.Close()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
