package redistest

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Forwarder is a TCP forwarder to a server on a loopback port of its own.
// Left alone it is a plain second address for the server, as a proxy, a load
// balancer or a DNS alias would give. It can also play a bad network between
// its clients and the server, each independently:
//
//   - SetDelay holds back the server's replies, while commands still take
//     effect on the server at once: a slow node or a slow return path.
//   - Hold holds up what clients send on the connections open at that
//     moment, while connections opened later pass freely; Free lets it go
//     on: a congested path that delivers a command long after it was sent.
//   - Garble puts a line of garbage in front of the next reply: a reply
//     that makes no sense, after which the client's stream is out of step.
//
// When one side of a connection ends, the forwarder ends the other, as a
// proxy does.
type Forwarder struct {
	// Addr is the forwarder's own address.
	Addr string

	target string
	ln     net.Listener
	delay  atomic.Int64           // nanoseconds; read per reply chunk, so it may change at any time
	garble atomic.Pointer[string] // the next reply chunk gets this line in front (Garble)
	done   chan struct{}          // closed by Close: delayed replies are dropped
	wg     sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond // broadcast when a link is freed or ended, or its pending bytes shrink
	links  map[*link]struct{}
	closed bool
}

// link is one client connection and the forwarder's own connection to the
// server for it.
type link struct {
	client, server net.Conn
	held           bool // requests wait in the forwarder (Hold)
	ended          bool // no request may reach the server any more
	pending        int  // request bytes read from the client, not yet written or dropped
	live           int  // the link's goroutines still running; at 0 it is forgotten
}

// Forward starts a forwarder to target (host:port), passing everything at
// once; see SetDelay and Hold for the bad network it can play.
func Forward(target string) (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &Forwarder{
		Addr:   ln.Addr().String(),
		target: target,
		ln:     ln,
		done:   make(chan struct{}),
		links:  map[*link]struct{}{},
	}
	f.cond = sync.NewCond(&f.mu)
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// NewClient returns a go-redis client for the server through the forwarder,
// set up as Server.NewClient is, so that a test sees the same client
// behaviour whichever way it reaches the server.
func (f *Forwarder) NewClient() *redis.Client { return newClient(f.Addr) }

// SetDelay makes every reply that the server sends from now on reach the
// client d later; 0 forwards at once. Replies already held keep their delay,
// and replies keep their order.
func (f *Forwarder) SetDelay(d time.Duration) { f.delay.Store(int64(d)) }

// Garble puts a line that is no RESP reply in front of the next chunk of
// reply the server sends, on whichever connection that is. The client reads
// it as the reply to its oldest pending command, and the real reply stays
// unread behind it.
func (f *Forwarder) Garble() { f.GarbleWith("?garbled") }

// GarbleWith is Garble with line (without its CRLF) as the garbage: an
// error reply ("-ERR ...") that holds control bytes, say, which the client
// reads as an error reply and hands over as it is.
func (f *Forwarder) GarbleWith(line string) { f.garble.Store(&line) }

// Hold holds up the bytes sent from now on over every connection open now;
// connections opened later pass freely, as a replacement connection does
// when it takes another path. Replies are not held.
func (f *Forwarder) Hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.links {
		l.held = true
	}
}

// Free lets the held connections go on, and waits until every byte they
// held has been written to the server, or dropped because the connection
// ended: a test can then inspect the server knowing the late commands have
// taken effect, if they ever will. A connection the server ended while held
// (CLIENT KILL) loses its held bytes: they never reach the server.
func (f *Forwarder) Free() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.links {
		l.held = false
	}
	f.cond.Broadcast()
	for {
		pending := 0
		for l := range f.links {
			pending += l.pending
		}
		if pending == 0 {
			return
		}
		f.cond.Wait()
	}
}

// Close stops the forwarder and ends its connections; held requests and
// delayed replies are dropped. Closing again does nothing more.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	for l := range f.links {
		l.ended = true
		_ = l.client.Close()
		_ = l.server.Close()
	}
	f.cond.Broadcast()
	f.mu.Unlock()
	err := f.ln.Close()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
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
			// The client sees the server refuse, as it would directly.
			_ = c.Close()
			continue
		}
		l := &link{client: c, server: up, live: 2}
		f.mu.Lock()
		if f.closed {
			// Close has already ended the links it knew of; this one came
			// too late to be ended by it.
			f.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		f.links[l] = struct{}{}
		f.mu.Unlock()
		f.wg.Add(2)
		go f.requests(l)
		go f.replies(l)
	}
}

// requests passes what the client sends on to the server, waiting while
// the link is held.
func (f *Forwarder) requests(l *link) {
	defer f.wg.Done()
	ended := false
	defer func() {
		// A link the server ended is closed by replies, once the replies
		// read before the end are delivered; a link Close ended is closed
		// already.
		if !ended {
			f.end(l)
		}
		f.forget(l)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := l.client.Read(buf)
		if n > 0 {
			f.mu.Lock()
			l.pending += n
			for l.held && !l.ended {
				f.cond.Wait()
			}
			ended = l.ended
			f.mu.Unlock()
			if ended {
				// The server's end of the connection is gone (or the
				// forwarder closed): the bytes could never be read there.
				f.settle(l, n)
				return
			}
			_, werr := l.server.Write(buf[:n])
			f.settle(l, n)
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// settle counts n pending request bytes as written or dropped, for Free.
func (f *Forwarder) settle(l *link, n int) {
	f.mu.Lock()
	l.pending -= n
	f.cond.Broadcast()
	f.mu.Unlock()
}

// delayed is a chunk of reply and the time it may go on.
type delayed struct {
	data []byte
	due  time.Time
}

// replies reads the server's replies as they come, so that the delay is
// counted from when the server sent each, and hands them to a writer that
// sends each when its delay is over.
func (f *Forwarder) replies(l *link) {
	defer f.wg.Done()
	defer f.forget(l)
	queue := make(chan delayed, 256)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		f.write(l.client, queue)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := l.server.Read(buf)
		if n > 0 {
			var data []byte
			if g := f.garble.Swap(nil); g != nil {
				data = []byte(*g + "\r\n")
			}
			d := delayed{data: append(data, buf[:n]...), due: time.Now().Add(time.Duration(f.delay.Load()))}
			select {
			case queue <- d:
			case <-writerDone:
			}
		}
		if err != nil {
			break
		}
	}
	// The server's end is gone: held requests must not reach it later
	// through a write that happens to succeed.
	f.mu.Lock()
	l.ended = true
	f.cond.Broadcast()
	f.mu.Unlock()
	close(queue)
	<-writerDone
	f.end(l)
}

// write sends the queued replies to the client, each when it is due, until
// the queue is closed and empty, the client is gone, or the forwarder closes.
func (f *Forwarder) write(c net.Conn, queue <-chan delayed) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for d := range queue {
		if wait := time.Until(d.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-f.done:
				return
			}
		}
		if _, err := c.Write(d.data); err != nil {
			return
		}
	}
}

// end closes both sides of a link, as a proxy does when one side ends.
func (f *Forwarder) end(l *link) {
	f.mu.Lock()
	l.ended = true
	f.cond.Broadcast()
	f.mu.Unlock()
	_ = l.client.Close()
	_ = l.server.Close()
}

// forget drops a link once both its goroutines are done, so that a
// forwarder whose clients reconnect often does not keep every connection
// it ever carried.
func (f *Forwarder) forget(l *link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.live--; l.live == 0 {
		delete(f.links, l)
	}
}
