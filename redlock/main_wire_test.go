package redlock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// wire injects faults at the connection: it is the Dialer of a client, and
// the Locker's own connections, made from the client's options, dial
// through it too, so the real pipeline runs. It counts the script calls
// written to the node, can hold them until its gate opens (a slow node), and
// can report each script call whose reply came back.
type wire struct {
	Client *redis.Client

	mu sync.Mutex
	n  int
	// total, if set, counts the script calls too (those of several nodes).
	total *atomic.Int64
	// gate, if set, holds every write with a script call until closed;
	// called then receives a value when a write reaches it.
	gate   chan struct{}
	once   sync.Once
	called chan struct{}
	// replies, if set, receives a value per script call once its reply has
	// been read.
	replies chan struct{}
	// cut, if set, loses the reply of every write with a script call: the
	// connection ends (EOF) right after the node got the call.
	cut bool
	// lose, if set, loses every write that contains it on its way: the
	// node never gets it, and its reply never comes; lost counts them.
	// Under mu.
	lose []byte
	lost int
	// mark, if set, counts the occurrences of it in the writes that go
	// through (a script's hash: its calls) in marked. Under mu.
	mark   []byte
	marked int
	// dials counts the connections dialled through the wire, failed
	// ones included.
	dials atomic.Int64
	// stall, if set, holds every write that contains it until stalled is
	// closed (a call held up on its way). Under mu.
	stall   []byte
	stalled chan struct{}
	// held counts the writes stall has held up. Under mu.
	held int
	// refuse, if set, fails every write that contains it and ends its
	// connection: the node cannot be reached. Under mu.
	refuse  []byte
	refused int
}

// awaitRefused waits until w has refused a call, then lets calls through
// again.
func (w *wire) awaitRefused(t *testing.T) {
	t.Helper()
	if !poll(t, 10*time.Second, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.refused > 0 }) {
		t.Fatal("no call was refused")
	}
	w.mu.Lock()
	w.refuse, w.refused = nil, 0
	w.mu.Unlock()
}

// setRefuse makes the wire fail every write that contains pat (nil: none),
// ending its connection, as a cut network would.
func (w *wire) setRefuse(pat []byte) {
	w.mu.Lock()
	w.refuse = pat
	w.mu.Unlock()
}

// stallOn holds up every write that contains pat from now on, until the
// returned func is called (safe to call more than once).
func (w *wire) stallOn(pat []byte) (free func()) {
	gate := make(chan struct{})
	w.mu.Lock()
	w.stall, w.stalled = pat, gate
	w.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}

// setLose makes the wire lose every write that contains pat (nil: none).
func (w *wire) setLose(pat []byte) {
	w.mu.Lock()
	w.lose = pat
	w.mu.Unlock()
}

// newWire returns a wire to server s, its client set up as
// redistest.Server.NewClient sets one up, then changed by mods, and closed
// at cleanup.
func newWire(t testing.TB, s *redistest.Server, mods ...func(*redis.Options)) *wire {
	t.Helper()
	w := &wire{}
	opt := &redis.Options{
		Addr:                  s.Addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		Protocol:              2,
		DisableIdentity:       true,
		Dialer:                w.dial,
	}
	for _, mod := range mods {
		mod(opt)
	}
	w.Client = redis.NewClient(opt)
	t.Cleanup(func() { _ = w.Client.Close() })
	return w
}

// countedClients returns a client per server whose script calls all count
// in n.
func countedClients(t testing.TB, servers []*redistest.Server, n *atomic.Int64) []*redis.Client {
	t.Helper()
	out := make([]*redis.Client, len(servers))
	for i, s := range servers {
		w := newWire(t, s)
		w.total = n
		out[i] = w.Client
	}
	return out
}

// gatedWire is a wire that holds every script call until open is called:
// a slow node.
func gatedWire(t *testing.T, s *redistest.Server) *wire {
	t.Helper()
	w := newWire(t, s)
	w.gate, w.called = make(chan struct{}), make(chan struct{}, 1)
	return w
}

// open lets every held call through; it is safe to call more than once.
func (w *wire) open() { w.once.Do(func() { close(w.gate) }) }

// calls returns the number of script calls (EVALSHA) written so far.
func (w *wire) calls() int { w.mu.Lock(); defer w.mu.Unlock(); return w.n }
func (w *wire) reset()     { w.mu.Lock(); w.n = 0; w.mu.Unlock() }

// heldUp returns the number of writes stallOn's pattern has held up.
func (w *wire) heldUp() int { w.mu.Lock(); defer w.mu.Unlock(); return w.held }

func (w *wire) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	w.dials.Add(1)
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &wireConn{Conn: c, w: w}, nil
}

// scriptCalls counts the EVALSHA commands in a write; go-redis writes each
// command whole into one buffer, and a batch as one write.
func scriptCalls(b []byte) int { return bytes.Count(b, []byte("$7\r\nevalsha\r\n")) }

type wireConn struct {
	net.Conn
	w       *wire
	pending int  // script calls written whose replies were not read yet
	cut     bool // the next read ends the connection
}

func (c *wireConn) Write(b []byte) (int, error) {
	c.w.mu.Lock()
	if c.w.stall != nil && bytes.Contains(b, c.w.stall) {
		gate := c.w.stalled
		c.w.held++
		c.w.mu.Unlock()
		<-gate
		c.w.mu.Lock()
	}
	if c.w.refuse != nil && bytes.Contains(b, c.w.refuse) {
		c.w.refused++
		c.w.mu.Unlock()
		_ = c.Conn.Close()
		return 0, errors.New("wire: cut off")
	}
	lost := c.w.lose != nil && bytes.Contains(b, c.w.lose)
	if lost {
		c.w.lost++
	} else if c.w.mark != nil {
		c.w.marked += bytes.Count(b, c.w.mark)
	}
	c.w.mu.Unlock()
	if lost {
		return len(b), nil
	}
	n := scriptCalls(b)
	if n > 0 {
		c.w.mu.Lock()
		c.w.n += n
		c.w.mu.Unlock()
		if c.w.total != nil {
			c.w.total.Add(int64(n))
		}
		if c.w.gate != nil {
			select {
			case c.w.called <- struct{}{}:
			default:
			}
			<-c.w.gate
		}
		c.pending += n
		c.cut = c.w.cut
	}
	return c.Conn.Write(b)
}

func (c *wireConn) Read(b []byte) (int, error) {
	if c.cut {
		_ = c.Conn.Close()
		return 0, io.EOF
	}
	n, err := c.Conn.Read(b)
	if n > 0 && c.pending > 0 && c.w.replies != nil {
		for ; c.pending > 0; c.pending-- {
			c.w.replies <- struct{}{}
		}
	}
	return n, err
}

// markedCalls returns how many calls of their marked script the wires
// carried, all told.
func markedCalls(wires []*wire) int {
	total := 0
	for _, w := range wires {
		w.mu.Lock()
		total += w.marked
		w.mu.Unlock()
	}
	return total
}

// newWires returns a wire to each of servers (newWire) and their clients.
func newWires(t *testing.T, servers []*redistest.Server) ([]*wire, []*redis.Client) {
	t.Helper()
	wires := make([]*wire, len(servers))
	clients := make([]*redis.Client, len(servers))
	for i, s := range servers {
		wires[i] = newWire(t, s)
		clients[i] = wires[i].Client
	}
	return wires, clients
}
