package conn

import (
	"context"
	"net"
	"testing"
)

// addrConn is a net.Conn that only has its addresses.
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c addrConn) LocalAddr() net.Addr  { return c.local }
func (c addrConn) RemoteAddr() net.Addr { return c.remote }

// A worker finds its socket among the pipe's last dials by its two
// addresses: the newest one that has them (an older one with the same
// addresses used the port before and is closed), once; and nothing for
// addresses that were not dialled or have been pushed out, nor for a
// socket whose local address matches but whose peer is another (a proxy's
// connection to the server that took the port of one of ours), nor when
// the server did not say its end.
func TestDialedClaimsNewestByAddress(t *testing.T) {
	var d dialed
	var next []net.Conn
	dial := d.note(func(context.Context, string, string) (net.Conn, error) {
		c := next[0]
		next = next[1:]
		return c, nil
	})
	server := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}
	at := func(port int) net.Conn {
		return addrConn{local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}, remote: server}
	}
	old, other, newer := at(5000), at(5001), at(5000)
	next = []net.Conn{old, other, newer}
	for range 3 {
		if _, err := dial(context.Background(), "tcp", "server"); err != nil {
			t.Fatal(err)
		}
	}
	if c := d.claim("127.0.0.1:5000", "127.0.0.1:6379"); c != newer {
		t.Fatalf("claim of a reused address: %v, want the newest connection", c)
	}
	if c := d.claim("127.0.0.1:5000", "127.0.0.1:6379"); c != old {
		t.Fatalf("second claim: %v, want the older connection", c)
	}
	if c := d.claim("127.0.0.1:5000", "127.0.0.1:6379"); c != nil {
		t.Fatalf("third claim: %v, want nil", c)
	}
	if c := d.claim("127.0.0.1:6000", "127.0.0.1:6379"); c != nil {
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
	if c := d.claim("127.0.0.1:5001", "127.0.0.1:6379"); c != nil {
		t.Fatalf("claim of a dial pushed out: %v, want nil", c)
	}
	// A proxy's socket to the server has the local port of one of ours,
	// which goes to the proxy: not ours.
	proxy := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7100}
	next = append(next, addrConn{local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5002}, remote: proxy})
	if _, err := dial(context.Background(), "tcp", "proxy"); err != nil {
		t.Fatal(err)
	}
	if c := d.claim("127.0.0.1:5002", "127.0.0.1:6379"); c != nil {
		t.Fatalf("claim of a socket to another peer: %v, want nil", c)
	}
	if c := d.claim("127.0.0.1:5002", ""); c != nil {
		t.Fatalf("claim with no server end: %v, want nil", c)
	}
	if c := d.claim("127.0.0.1:5002", "127.0.0.1:7100"); c == nil {
		t.Fatal("claim of the socket by both its ends: nil")
	}
}
