package redistest

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// SlowForwarder is a TCP forwarder on a loopback port of its own that holds
// back the server's replies for a delay the caller sets, and may change, at
// any time: a slow node, or a slow network, whose commands still take effect
// on the server at once. Replies keep their order.
type SlowForwarder struct {
	// Addr is the forwarder's own address.
	Addr string

	target string
	delay  atomic.Int64 // nanoseconds
	ln     net.Listener
	done   chan struct{} // closed by Close: held replies are dropped
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ForwardSlow starts a forwarder to target (host:port) with no delay; see
// SetDelay.
func ForwardSlow(target string) (*SlowForwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &SlowForwarder{Addr: ln.Addr().String(), target: target, ln: ln, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// SetDelay makes every reply that the server sends from now on reach the
// client d later; 0 forwards at once. Replies already held keep their delay.
func (f *SlowForwarder) SetDelay(d time.Duration) { f.delay.Store(int64(d)) }

func (f *SlowForwarder) accept() {
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
		go f.requests(up, c)
		go f.replies(c, up)
	}
}

// track records a connection pair; false once the forwarder is closed.
func (f *SlowForwarder) track(cs ...net.Conn) bool {
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

// requests passes the client's commands on at once.
func (f *SlowForwarder) requests(up, c net.Conn) {
	defer f.wg.Done()
	_, _ = io.Copy(up, c)
	_ = up.Close()
	_ = c.Close()
}

// held is a chunk of reply and the time it may go on.
type held struct {
	data []byte
	due  time.Time
}

// replies reads the server's replies as they come and hands them to a
// writer that sends each when its delay is over.
func (f *SlowForwarder) replies(c, up net.Conn) {
	defer f.wg.Done()
	queue := make(chan held, 256)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		f.write(c, queue)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			h := held{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(time.Duration(f.delay.Load()))}
			select {
			case queue <- h:
			case <-writerDone:
			}
		}
		if err != nil {
			break
		}
	}
	close(queue)
	<-writerDone
	_ = up.Close()
	_ = c.Close()
}

func (f *SlowForwarder) write(c net.Conn, queue <-chan held) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for h := range queue {
		if wait := time.Until(h.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-f.done:
				return
			}
		}
		if _, err := c.Write(h.data); err != nil {
			return
		}
	}
}

// Close stops the forwarder and ends its connections; held replies are
// dropped.
func (f *SlowForwarder) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
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

// NewClient returns a go-redis client for the server through the forwarder,
// set up as Server.NewClient is.
func (f *SlowForwarder) NewClient() *redis.Client { return newClient(f.Addr) }
