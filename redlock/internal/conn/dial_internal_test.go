package conn

import (
	"context"
	"errors"
	"net"
	"testing"
)

// closeConn is a net.Conn that records whether it was closed.
type closeConn struct {
	net.Conn
	closed bool
}

func (c *closeConn) Close() error { c.closed = true; return nil }

// The pool's dialer takes the sockets the workers offer, the oldest first,
// and dials only when none is on offer; a worker takes back and closes its
// socket when no dial took it, and only its own.
func TestSparesHandOffToPool(t *testing.T) {
	var s spares
	dialled := 0
	errDial := errors.New("dialled")
	dial := s.dialer(func(context.Context, string, string) (net.Conn, error) {
		dialled++
		return nil, errDial
	})
	a, b := &closeConn{}, &closeConn{}
	backA := s.offer(a)
	backB := s.offer(b)
	if c, err := dial(t.Context(), "tcp", "x"); c != net.Conn(a) || err != nil {
		t.Fatalf("first dial = %v, %v; want the first socket offered", c, err)
	}
	backA() // taken: nothing to take back
	if a.closed {
		t.Error("a socket the pool took was closed when taken back")
	}
	backB() // not taken: closed
	if !b.closed {
		t.Error("a socket no dial took was not closed when taken back")
	}
	if c, err := dial(t.Context(), "tcp", "x"); c != nil || !errors.Is(err, errDial) || dialled != 1 {
		t.Fatalf("dial with nothing on offer = %v, %v after %d dials; want one dial of its own", c, err, dialled)
	}
}
