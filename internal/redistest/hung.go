package redistest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Hung is a node that hangs: a loopback listener that accepts connections
// and reads whatever is sent to it, but never answers and never closes a
// connection by itself, as a stopped process behind a live socket, or a
// proxy whose upstream stopped answering, would. A TLS client facing it waits
// in its handshake; a plain client waits for its first reply.
type Hung struct {
	// Addr is the listener's address.
	Addr string

	ln       net.Listener
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	accepted int
	closed   bool
	wg       sync.WaitGroup
}

// Hang starts a hung listener on a loopback port reserved, as a
// forwarder's is, for the rest of the process.
func Hang() (*Hung, error) {
	ln, err := listenReserved()
	if err != nil {
		return nil, err
	}
	h := &Hung{Addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	h.wg.Add(1)
	go h.accept()
	return h, nil
}

// HangT starts a hung listener for a test and closes it at cleanup.
func HangT(t testing.TB) *Hung {
	t.Helper()
	h, err := Hang()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("closing hung listener %s: %v", h.Addr, err)
		}
	})
	return h
}

func (h *Hung) accept() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			_ = c.Close()
			return
		}
		h.conns[c] = struct{}{}
		h.accepted++
		h.mu.Unlock()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			// Read and drop everything, so that the client's writes
			// succeed and only its reads wait.
			_, _ = io.Copy(io.Discard, c)
		}()
	}
}

// Accepted returns how many connections the listener has accepted.
func (h *Hung) Accepted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.accepted
}

// Close stops the listener and closes its connections: their clients then
// see the connection end.
func (h *Hung) Close() error {
	h.mu.Lock()
	h.closed = true
	for c := range h.conns {
		_ = c.Close()
	}
	h.mu.Unlock()
	err := h.ln.Close()
	h.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
