package conn

import (
	"context"
	"net"
	"testing"
)

// addrConn is a net.Conn that only has a local address.
type addrConn struct {
	net.Conn
	local net.Addr
}

func (c addrConn) LocalAddr() net.Addr { return c.local }

// A worker finds its socket among the pipe's last dials by its local
// address: the newest one that has it (an older one with the same address
// used the port before and is closed), once; and nothing for an address
// that was not dialled or has been pushed out.
func TestDialedClaimsNewestByAddress(t *testing.T) {
	var d dialed
	var next []net.Conn
	dial := d.note(func(context.Context, string, string) (net.Conn, error) {
		c := next[0]
		next = next[1:]
		return c, nil
	})
	at := func(port int) net.Conn {
		return addrConn{local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}
	}
	old, other, newer := at(5000), at(5001), at(5000)
	next = []net.Conn{old, other, newer}
	for range 3 {
		if _, err := dial(context.Background(), "tcp", "server"); err != nil {
			t.Fatal(err)
		}
	}
	if c := d.claim("127.0.0.1:5000"); c != newer {
		t.Fatalf("claim of a reused address: %v, want the newest connection", c)
	}
	if c := d.claim("127.0.0.1:5000"); c != old {
		t.Fatalf("second claim: %v, want the older connection", c)
	}
	if c := d.claim("127.0.0.1:5000"); c != nil {
		t.Fatalf("third claim: %v, want nil", c)
	}
	if c := d.claim("127.0.0.1:6000"); c != nil {
		t.Fatalf("claim of an address never dialled: %v, want nil", c)
	}
	for i := range len(d.conns) {
		next = append(next, at(7000+i))
	}
	for range len(d.conns) {
		if _, err := dial(context.Background(), "tcp", "server"); err != nil {
			t.Fatal(err)
		}
	}
	if c := d.claim("127.0.0.1:5001"); c != nil {
		t.Fatalf("claim of a dial pushed out: %v, want nil", c)
	}
}
