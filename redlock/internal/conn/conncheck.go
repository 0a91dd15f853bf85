package conn

import (
	"context"
	"net"
	"sync"
	"time"
)

// A worker keeps its connection between batches, outside go-redis's pool, so
// go-redis's check of an idle connection before reuse never runs on it. A
// server that restarted (or closed the connection for idleness) would fail
// the next batch with EOF: one lost vote, and in single-node mode a failed
// Obtain that reports a broken connection while the node is up. Nothing of
// that batch would have reached the server, but once a batch is written the
// worker cannot know that, and a script is never sent twice. So a worker
// looks before it writes: when its connection has been idle for a while, a
// non-blocking peek at the socket tells whether the server has closed it,
// and the batch then goes out on a new connection instead.
//
// The socket go-redis sets a worker's connection up on need not be the one
// that worker dialled (see dial.go: the pool takes whichever is on offer, or
// an idle connection), so the worker finds its socket among the pipe's last
// dials by both its ends, which the server reports when the connection is
// set up (CLIENT INFO addr and laddr, see open). Behind a proxy or NAT the
// addresses differ, and such a connection is not looked at. Its local
// address alone is not enough: a proxy's own connection to the server may
// have the local port of one of ours (a port is reused towards another
// peer), and a worker then looked at, and waited on, another worker's
// socket.

// idleCheck is how long a connection must have been idle before a batch
// looks at it. Under load batches follow each other closer than that and
// pay nothing; an idle node's call pays one non-blocking system call.
const idleCheck = time.Millisecond

// dialed holds the last few connections a pipe's client opened.
type dialed struct {
	mu    sync.Mutex
	conns [8]net.Conn
	next  int
}

// note wraps dial so that every connection it opens is kept in d.
func (d *dialed) note(dial func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			d.mu.Lock()
			d.conns[d.next] = c
			d.next = (d.next + 1) % len(d.conns)
			d.mu.Unlock()
		}
		return c, err
	}
}

// claim takes the newest kept connection from local address addr to
// remote address raddr, or returns nil (always for an empty raddr). Newest
// first: an older one with the same addresses (a port used again) is
// closed.
func (d *dialed) claim(addr, raddr string) net.Conn {
	if raddr == "" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := 1; k <= len(d.conns); k++ {
		i := (d.next - k + len(d.conns)) % len(d.conns)
		if c := d.conns[i]; c != nil && c.LocalAddr().String() == addr && c.RemoteAddr().String() == raddr {
			d.conns[i] = nil
			return c
		}
	}
	return nil
}

// closedIdle reports whether the worker's connection, idle since its last
// batch, was closed by the server or holds bytes nobody asked for.
func (w *worker) closedIdle(now time.Time) bool {
	return w.netConn != nil && now.Sub(w.sentAt) >= idleCheck && !quiet(w.netConn)
}
