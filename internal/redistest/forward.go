package redistest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Forwarder is the TCP fault proxy of every test in the repository: the
// library's, the chaos suite's and the benchmark harness's. It listens on
// a loopback port of its own in front of one server. Left alone it is a
// plain second address for the server, as a proxy, a load balancer or a
// DNS alias would give. It can also play a bad network between its clients
// and the server:
//
//   - SetFaults and UpdateFaults set the faults that act on every
//     connection, open or new (see Faults): requests or replies held back
//     by a delay with jitter (SetDelay is the reply delay alone), a
//     partition that drops every byte both ways, replies dropped while
//     commands still take effect, connections reset as soon as their
//     client sends.
//   - Hold holds up what clients send on the connections open at that
//     moment, while connections opened later pass freely; Free lets it go
//     on: a congested path that delivers a command long after it was sent.
//   - Garble puts a line of garbage in front of the next reply: a reply
//     that makes no sense, after which the client's stream is out of step.
//   - MoveTo puts another server behind the forwarder, open connections
//     included, between one command and the next: a proxy that follows a
//     failover, unseen by its clients. Disconnect ends the open
//     connections, as a proxy that follows a failover by cutting them does.
//   - Isolate closes the listener and every connection: clients are
//     refused, as by a host whose server died, until Reconnect listens
//     again on the same port.
//
// Every accepted connection is served on a goroutine of its own, and the
// server is dialled only once the client has sent something: a storm of
// connections whose clients gave up before sending (clients that time out
// and reconnect on a busy machine) costs the server nothing, and the
// clients behind the storm are served. A proxy whose accept loop dials the
// server for each connection in turn (toxiproxy's) falls behind such a
// storm and never catches up.
//
// When one side of a connection ends, the forwarder ends the other, as a
// proxy does.
type Forwarder struct {
	// Addr is the forwarder's own address.
	Addr string

	target   atomic.Pointer[string] // where connections go (MoveTo)
	faults   atomic.Pointer[faultState]
	faultsMu sync.Mutex             // serializes UpdateFaults
	garble   atomic.Pointer[string] // the next reply chunk gets this line in front (Garble)
	done     chan struct{}          // closed by Close: delayed replies are dropped
	wg       sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond   // broadcast when a link is freed or ended, its pending bytes shrink, or a reply is read
	ln     net.Listener // nil while isolated or closed
	links  map[*link]struct{}
	closed bool
}

// Faults are the network faults a Forwarder plays on every connection,
// open or new. The zero value passes everything at once.
type Faults struct {
	// RequestDelay holds back each chunk that a client sends, ReplyDelay
	// each chunk that the server replies, by that long ± Jitter (counted
	// from when the forwarder read it; a delay of 0 gets no jitter).
	// Chunks keep their order. A request waiting out its delay goes by the
	// faults in force when the delay ends; a reply keeps the delay it got.
	RequestDelay, ReplyDelay, Jitter time.Duration
	// Blackhole drops every byte both ways and leaves the connections
	// open: a network partition. A connection that lost a request stays on
	// its server (MoveTo passes it by).
	Blackhole bool
	// DropReplies drops what the server sends: commands take effect, and
	// their clients never learn it.
	DropReplies bool
	// Reset resets (TCP RST) a connection, both sides, as soon as its
	// client sends something.
	Reset bool
}

// faultState is a set of faults in force. A new state replaces it (it is
// never changed in place) and closes its changed channel, so that a request
// waiting out its delay sees the change.
type faultState struct {
	Faults
	changed chan struct{}
}

// jittered returns d ± jitter, where spread in [-1, 1) picks the point in the
// range; 0 stays 0, and the result is never negative.
func jittered(d, jitter time.Duration, spread float64) time.Duration {
	if d <= 0 {
		return 0
	}
	return max(d+time.Duration(float64(jitter)*spread), 0)
}

// link is one client connection and the forwarder's own connection to the
// server for it.
type link struct {
	client     net.Conn
	server     net.Conn      // the connection to the server now, nil until dialled; replaced only by requests (move)
	queue      chan delayed  // replies on their way to the client, from every server the link had
	writerDone chan struct{} // closed when the writer stops
	held       bool          // requests wait in the forwarder (Hold)
	ended      bool          // no request may reach the server any more
	unread     bool          // the replies could not be read as RESP: the link stays where it is
	pending    int           // request bytes read from the client, not yet written or dropped
	answered   int           // replies read from the server now, skipped ones included
	live       int           // the link's request and reply goroutines still running; at 0 it is forgotten

	// Owned by the requests goroutine.
	backend string    // the server's address
	sent    int       // commands written to the server now, replayed ones included
	opaque  bool      // the stream cannot be moved (not RESP, or no reply per command)
	inTx    bool      // between MULTI and EXEC or DISCARD
	partial []byte    // the start of a command not yet read whole
	setup   []setting // the commands that set the connection up, as sent, to replay after a move
}

// Forward starts a forwarder to target (host:port), passing everything at
// once; see the Forwarder's doc for the bad network it can play. Its port
// stays reserved for the rest of the process, so that after Close its
// address stays dead for whoever still points at it.
func Forward(target string) (*Forwarder, error) {
	ln, err := listenReserved()
	if err != nil {
		return nil, err
	}
	f := &Forwarder{
		Addr:  ln.Addr().String(),
		ln:    ln,
		done:  make(chan struct{}),
		links: map[*link]struct{}{},
	}
	f.target.Store(&target)
	f.faults.Store(&faultState{changed: make(chan struct{})})
	f.cond = sync.NewCond(&f.mu)
	f.wg.Add(1)
	go f.accept(ln)
	return f, nil
}

// ForwardT starts a forwarder to target for a test and closes it at
// cleanup, where a failed Close fails the test.
func ForwardT(t testing.TB, target string) *Forwarder {
	t.Helper()
	f, err := Forward(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("closing the forwarder to %s: %v", target, err)
		}
	})
	return f
}

// ClientT returns a client through the forwarder, as NewClient does, closed
// at the test's cleanup.
func (f *Forwarder) ClientT(t testing.TB) *redis.Client {
	c := f.NewClient()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// NewClient returns a go-redis client for the server through the forwarder,
// set up as Server.NewClient is, so that a test sees the same client
// behaviour whichever way it reaches the server.
func (f *Forwarder) NewClient() *redis.Client { return newClient(f.Addr) }

// SetFaults replaces the faults in force with faults; SetFaults(Faults{})
// heals them all. A negative delay or jitter is an error, and leaves the
// faults unchanged.
func (f *Forwarder) SetFaults(faults Faults) error {
	return f.UpdateFaults(func(x *Faults) { *x = faults })
}

// UpdateFaults changes the faults in force with change, which gets a copy
// of them, as one step: calls from several goroutines do not lose each
// other's changes. A negative delay or jitter is an error, and leaves the
// faults unchanged.
func (f *Forwarder) UpdateFaults(change func(*Faults)) error {
	f.faultsMu.Lock()
	defer f.faultsMu.Unlock()
	old := f.faults.Load()
	next := &faultState{Faults: old.Faults, changed: make(chan struct{})}
	change(&next.Faults)
	if next.RequestDelay < 0 || next.ReplyDelay < 0 || next.Jitter < 0 {
		return fmt.Errorf("redistest: faults with a negative delay or jitter (request %v, reply %v, jitter %v)",
			next.RequestDelay, next.ReplyDelay, next.Jitter)
	}
	f.faults.Store(next)
	close(old.changed)
	return nil
}

// Faults returns the faults in force.
func (f *Forwarder) Faults() Faults { return f.faults.Load().Faults }

// SetDelay makes every reply that the server sends from now on reach the
// client d later; 0 (or less) forwards at once. Replies already held keep
// their delay, and replies keep their order. The other faults stay.
func (f *Forwarder) SetDelay(d time.Duration) {
	// max keeps the delay valid, so UpdateFaults cannot fail.
	_ = f.UpdateFaults(func(x *Faults) { x.ReplyDelay = max(d, 0) })
}

// Garble puts a line that is no RESP reply in front of the next chunk of
// reply the server sends, on whichever connection that is. The client reads
// it as the reply to its oldest pending command, and the real reply stays
// unread behind it.
func (f *Forwarder) Garble() { f.GarbleWith("?garbled") }

// GarbleWith is Garble with line (without its CRLF) as the garbage: an
// error reply ("-ERR ...") that holds control bytes, say, which the client
// reads as an error reply and hands over as it is.
func (f *Forwarder) GarbleWith(line string) { f.garble.Store(&line) }

// MoveTo puts the server at target (host:port) behind the forwarder, as a
// proxy that follows a failover does, without its clients noticing:
// connections opened from now on go to target, and each open connection
// goes on there from the next command its client sends. The commands
// already sent get their replies from the old server first; the new
// server connection is set up with the commands that set up the client's
// connection (HELLO, AUTH, SELECT, CLIENT SETNAME, CLIENT SETINFO,
// READONLY, READWRITE, the last of each kind, in their order), whose
// replies the client never sees. Moving back, or on again, works the same.
//
// Other server-side state of a connection does not follow it: WATCH,
// CLIENT TRACKING and the like. A connection inside MULTI moves after its
// EXEC or DISCARD; one that subscribed, ran MONITOR or CLIENT REPLY, or
// sent or got bytes that are no RESP, stays on its server. If target
// cannot be reached, a connection that was to move is ended once its
// client has its replies, as a proxy ends it.
func (f *Forwarder) MoveTo(target string) { f.target.Store(&target) }

// Target returns the server's address that connections go to now: the one
// given to Forward, or to the latest MoveTo.
func (f *Forwarder) Target() string { return *f.target.Load() }

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

// Disconnect ends every open connection, both sides; the forwarder goes on
// accepting new ones.
func (f *Forwarder) Disconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l := range f.links {
		cutLocked(l, false)
	}
	f.cond.Broadcast()
}

// Isolate closes the listener and ends every connection: to its clients
// the server is a host whose server process died (connection refused).
// Reconnect undoes it. The faults stay as they are.
func (f *Forwarder) Isolate() {
	f.mu.Lock()
	ln := f.unlistenLocked()
	f.mu.Unlock()
	if ln != nil {
		_ = ln.Close() // ours alone: its accept loop returns
	}
}

// unlistenLocked takes the listener away (nil when there is none) and ends
// every connection, for Isolate and Close; the caller closes the listener
// once f.mu is released. Under f.mu.
func (f *Forwarder) unlistenLocked() net.Listener {
	ln := f.ln
	f.ln = nil
	for l := range f.links {
		cutLocked(l, false)
	}
	f.cond.Broadcast()
	return ln
}

// Reconnect listens again on the forwarder's address after Isolate; it does
// nothing when the forwarder is listening. It fails after Close, or when
// the port cannot be bound.
func (f *Forwarder) Reconnect() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("redistest: forwarder %s is closed", f.Addr)
	}
	if f.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", f.Addr)
	if err != nil {
		return fmt.Errorf("redistest: forwarder listening again: %w", err)
	}
	f.ln = ln
	f.wg.Add(1)
	go f.accept(ln)
	return nil
}

// Close stops the forwarder and ends its connections; held requests and
// delayed replies are dropped. Closing again does nothing more.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
	ln := f.unlistenLocked()
	f.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// cutLocked ends both sides of l at once, with a TCP RST when reset is
// true; f.mu is held, and the caller broadcasts f.cond.
func cutLocked(l *link, reset bool) {
	l.ended = true
	for _, c := range []net.Conn{l.client, l.server} {
		if c == nil {
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

// accept serves each connection ln accepts on a goroutine of its own.
func (f *Forwarder) accept(ln net.Listener) {
	defer f.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed by Close or Isolate
		}
		l := &link{
			client: c, live: 1,
			queue: make(chan delayed, 256), writerDone: make(chan struct{}),
		}
		f.mu.Lock()
		if f.ln != ln {
			// Close or Isolate has already ended the links it knew of;
			// this one came too late to be ended by it.
			f.mu.Unlock()
			_ = c.Close()
			return
		}
		f.links[l] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serve(l)
	}
}

// serve dials the server for l once its client has sent something, then
// passes the link's traffic both ways until it ends. A client that leaves
// before sending costs the server nothing. If the server cannot be reached,
// the client's connection is closed, as a proxy closes it.
func (f *Forwarder) serve(l *link) {
	defer f.wg.Done()
	buf := make([]byte, 32<<10)
	n, err := l.client.Read(buf)
	if n == 0 {
		f.end(l)
		f.forget(l)
		return
	}
	target := f.Target()
	up, derr := net.DialTimeout("tcp", target, 5*time.Second)
	f.mu.Lock()
	if derr != nil || l.ended {
		f.mu.Unlock()
		if up != nil {
			_ = up.Close()
		}
		f.end(l)
		f.forget(l)
		return
	}
	l.server, l.backend = up, target
	l.live++
	f.wg.Add(2)
	f.mu.Unlock()
	go f.replies(l, up, 0)
	go func() {
		defer f.wg.Done()
		defer close(l.writerDone)
		f.write(l.client, l.queue)
	}()
	f.requests(l, buf, n, err)
}

// requests passes what the client sends on to the server, through the
// faults, waiting while the link is held; buf[:n] and err are what the
// first read returned.
func (f *Forwarder) requests(l *link, buf []byte, n int, err error) {
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
	for {
		if n > 0 {
			arrived := time.Now()
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
			switch f.admit(arrived) {
			case resetLink:
				f.mu.Lock()
				cutLocked(l, true)
				f.cond.Broadcast()
				f.mu.Unlock()
				f.settle(l, n)
				ended = true
				return
			case dropChunk:
				// The server's stream is no longer in step with what the
				// client sent: the link cannot move any more.
				l.opaque, l.partial = true, nil
				f.settle(l, n)
			case passChunk:
				werr := f.pass(l, buf[:n])
				f.settle(l, n)
				if errors.Is(werr, errEnded) {
					// Ended by Close, or by the replies goroutine once the
					// client has what was read before the end.
					ended = true
					return
				}
				if werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
		n, err = l.client.Read(buf)
	}
}

// verdict is what the faults make of a chunk a client sent.
type verdict int

const (
	passChunk verdict = iota
	dropChunk
	resetLink
)

// admit waits out the request delay of a chunk read at arrived and returns
// what the faults in force then make of it. A change of faults while it
// waits is seen at once; Close drops the chunk.
func (f *Forwarder) admit(arrived time.Time) verdict {
	spread := 2*rand.Float64() - 1
	for {
		s := f.faults.Load()
		switch {
		case s.Reset:
			return resetLink
		case s.Blackhole:
			return dropChunk
		}
		wait := time.Until(arrived.Add(jittered(s.RequestDelay, s.Jitter, spread)))
		if wait <= 0 {
			return passChunk
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.changed:
			t.Stop()
		case <-f.done:
			t.Stop()
			return dropChunk
		}
	}
}

// errEnded reports a link that ended while it was to move, or could not
// reach the server it was to move to.
var errEnded = errors.New("redistest: connection ended")

// pass writes data, read from the client, to the server; at a boundary
// between commands where the forwarder's target is no longer the link's
// server, it moves the link there first.
func (f *Forwarder) pass(l *link, data []byte) error {
	start := 0 // data[start:] is not written yet
	for off := 0; off < len(data) && !l.opaque; {
		if len(l.partial) == 0 && !l.inTx && f.Target() != l.backend {
			if _, err := l.server.Write(data[start:off]); err != nil {
				return err
			}
			start = off
			if err := f.move(l); err != nil {
				return err
			}
			if l.opaque {
				break
			}
		}
		cmd, prev := data[off:], len(l.partial)
		if prev > 0 {
			l.partial = append(l.partial, data[off:]...)
			cmd = l.partial
		}
		n, args, ok, err := respCommand(cmd)
		if err != nil {
			l.opaque, l.partial = true, nil
			break
		}
		if !ok {
			if prev == 0 {
				l.partial = append(l.partial, data[off:]...)
			}
			break
		}
		l.note(cmd[:n], args)
		if len(args) > 0 { // an empty inline command gets no reply
			l.sent++
		}
		off += n - prev
		l.partial = l.partial[:0]
	}
	_, err := l.server.Write(data[start:])
	return err
}

// setupCommands are the commands that set up a connection, which a moved
// connection replays on its new server.
var setupCommands = map[string]bool{
	"HELLO": true, "AUTH": true, "SELECT": true, "READONLY": true, "READWRITE": true,
	"CLIENT SETNAME": true, "CLIENT SETINFO": true,
}

// setting is a command that set up a connection, as sent, and the setting
// it makes, which a later command of the same kind replaces.
type setting struct {
	kind string
	raw  []byte
}

// note keeps track of what the command (raw, as sent, and its arguments)
// does to the connection's state.
func (l *link) note(raw []byte, args [][]byte) {
	if len(args) == 0 {
		return
	}
	name := strings.ToUpper(string(args[0]))
	sub := ""
	if len(args) > 1 {
		sub = strings.ToUpper(string(args[1]))
	}
	switch name {
	case "MULTI":
		l.inTx = true
	case "EXEC", "DISCARD":
		l.inTx = false
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR", "SYNC", "PSYNC":
		// No longer one reply per command.
		l.opaque = true
	case "CLIENT":
		if sub == "REPLY" {
			l.opaque = true
		}
		name += " " + sub
	}
	if !setupCommands[name] {
		return
	}
	kind := name
	switch {
	case name == "READWRITE":
		kind = "READONLY" // one setting, either way
	case name == "CLIENT SETINFO" && len(args) > 2:
		kind += " " + strings.ToUpper(string(args[2]))
	}
	// The latest of each kind is replayed, after the others that came
	// before it.
	l.setup = slices.DeleteFunc(l.setup, func(s setting) bool { return s.kind == kind })
	l.setup = append(l.setup, setting{kind: kind, raw: append([]byte(nil), raw...)})
}

// move moves the link to the forwarder's target once the server now has
// answered every command sent to it; the client's next command goes to the
// new server. On errEnded the link is ended, but the old server's
// replies still reach the client; a link whose replies cannot be read is
// not moved (opaque).
func (f *Forwarder) move(l *link) error {
	target := f.Target()
	f.mu.Lock()
	for l.answered < l.sent && !l.ended && !l.unread {
		f.cond.Wait()
	}
	ended, unread := l.ended, l.unread
	f.mu.Unlock()
	if ended {
		return errEnded
	}
	if unread {
		l.opaque = true
		return nil
	}
	up, err := net.Dial("tcp", target)
	f.mu.Lock()
	old := l.server
	if err != nil || l.ended {
		l.ended = true
		f.cond.Broadcast()
		f.mu.Unlock()
		if up != nil {
			_ = up.Close()
		}
		_ = old.Close()
		return errEnded
	}
	l.server, l.answered = up, 0
	l.live++
	f.wg.Add(1)
	f.mu.Unlock()
	// The old server has answered everything: its replies goroutine reads
	// no more and, seeing the link moved on, leaves it alone.
	_ = old.Close()
	l.backend, l.sent = target, len(l.setup)
	go f.replies(l, up, len(l.setup))
	var replay []byte
	for _, s := range l.setup {
		replay = append(replay, s.raw...)
	}
	_, err = up.Write(replay)
	return err
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

// replies reads the replies of one server connection of the link as they
// come, so that the delay is counted from when the server sent each, and
// queues them for the writer, which sends each when its delay is over. The
// first skip replies are the server's answers to the commands a move
// replayed, which the client must not see.
func (f *Forwarder) replies(l *link, up net.Conn, skip int) {
	defer f.wg.Done()
	defer f.forget(l)
	scan := replyScan{skip: skip}
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			out, answered := scan.feed(buf[:n])
			if s := f.faults.Load(); len(out) > 0 && !s.Blackhole && !s.DropReplies {
				if g := f.garble.Swap(nil); g != nil {
					out = append([]byte(*g+"\r\n"), out...)
				}
				due := time.Now().Add(jittered(s.ReplyDelay, s.Jitter, 2*rand.Float64()-1))
				select {
				case l.queue <- delayed{data: out, due: due}:
				case <-l.writerDone:
				}
			}
			// Counted once queued, so that a move finds them ahead of
			// the new server's replies.
			f.mu.Lock()
			l.answered += answered
			l.unread = l.unread || scan.unread
			f.cond.Broadcast()
			f.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	f.mu.Lock()
	if l.server != up {
		// The link moved on to another server.
		f.mu.Unlock()
		return
	}
	// The server's end is gone: held requests must not reach it later
	// through a write that happens to succeed.
	l.ended = true
	f.cond.Broadcast()
	f.mu.Unlock()
	close(l.queue)
	<-l.writerDone
	f.end(l)
}

// replyScan finds where replies end in what one server connection sends.
type replyScan struct {
	skip      int    // replies still to drop
	partial   []byte // the start of a reply not yet read whole
	delivered bool   // partial has been passed on already
	unread    bool   // the stream is no RESP: it is passed on unread
}

// feed takes the next bytes the server sent and returns those to pass on
// to the client (a fresh slice) and how many replies they complete,
// dropped ones included. Pushes answer no command and are not counted.
func (s *replyScan) feed(data []byte) (out []byte, replies int) {
	if s.unread {
		return append([]byte(nil), data...), 0
	}
	buf := data
	if len(s.partial) > 0 {
		s.partial = append(s.partial, data...)
		buf = s.partial
	}
	done := 0 // buf[:done] is passed on or dropped
	if s.delivered {
		done = len(buf) - len(data)
	}
	pos := 0
	for {
		n, push, ok, err := respValue(buf[pos:])
		if err != nil {
			s.unread = true
			out = append(out, buf[max(pos, done):]...)
			s.partial = nil
			return out, replies
		}
		if !ok {
			break
		}
		switch {
		case push:
			out = append(out, buf[max(pos, done):pos+n]...)
		case s.skip > 0:
			s.skip--
			replies++
		default:
			out = append(out, buf[max(pos, done):pos+n]...)
			replies++
		}
		pos += n
	}
	rest := buf[pos:]
	s.delivered = false
	if s.skip == 0 && len(rest) > 0 {
		// A reply begun is passed on at once, as a plain forwarder would.
		out = append(out, buf[max(pos, done):]...)
		s.delivered = true
	}
	s.partial = append(s.partial[:0], rest...)
	return out, replies
}

// write sends the queued replies to the client, each when it is due, until
// the queue is closed and empty, the client is gone, or the forwarder
// closes. A reply due while the faults drop replies is dropped.
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
		if s := f.faults.Load(); s.Blackhole || s.DropReplies {
			continue
		}
		if _, err := c.Write(d.data); err != nil {
			return
		}
	}
}

// end closes both sides of a link, as a proxy does when one side ends.
func (f *Forwarder) end(l *link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cutLocked(l, false)
	f.cond.Broadcast()
}

// forget drops a link once its request and reply goroutines are done, so
// that a forwarder whose clients reconnect often does not keep every
// connection it ever carried.
func (f *Forwarder) forget(l *link) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.live--; l.live == 0 {
		delete(f.links, l)
	}
}
