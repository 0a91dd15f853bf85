package conn

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// A node whose URL and server disagree about TLS fails in ways that say
// nothing of TLS: a TLS client's handshake with a plain server waits for
// bytes that never come (the server waits for the end of a command line),
// and a plain client's commands to a TLS-only port end in a closed
// connection. Both looked like an outage, waited out. When a connection
// fails so, the pipe asks the server the other way once (a plain PING, or
// a TLS handshake that checks no certificate), and a server that answers
// makes the failure a TLSMismatch: a refusal no retry mends (Permanent).

// TLSMismatch is a node whose client and server disagree about TLS.
type TLSMismatch struct {
	// ServerTLS is true when the server speaks TLS and the client does
	// not; false when the client speaks TLS and the server does not.
	ServerTLS bool
	// Err is the connection's own failure.
	Err error
}

func (e *TLSMismatch) Error() string {
	if e.ServerTLS {
		return "TLS mismatch: the server speaks TLS on this port and the client does not: use a rediss:// URL (or give the client a TLSConfig)"
	}
	return "TLS mismatch: the client speaks TLS (rediss://) and the server on this port does not: use a redis:// URL, or the server's tls-port"
}

func (e *TLSMismatch) Unwrap() error { return e.Err }

// usesTLS reports whether the pipe's connections speak TLS.
func (p *Pipe) usesTLS() bool { return p.own.Options().TLSConfig != nil }

// checkTLS returns err as a TLSMismatch when the server speaks the other
// way than the pipe's connections (TLS or plain TCP), else err. It asks
// only after failures that a mismatch causes: a TLS handshake that failed
// or timed out, a plain connection that the server ended or answered with
// what is no reply. It is bounded by the node timeout and by Close.
func (p *Pipe) checkTLS(err error) error {
	var (
		mismatch  *TLSMismatch
		handshake *handshakeError
		reply     redis.Error
		header    tls.RecordHeaderError
	)
	switch {
	case err == nil || !p.probeTLS || errors.As(err, &mismatch) || errors.As(err, &reply):
		return err // a server that answered in RESP speaks our way
	case p.usesTLS():
		if !errors.As(err, &handshake) {
			return err // no TLS server to ask: the dial failed
		}
		if errors.As(err, &header) && (header.RecordHeader[0] == '-' || header.RecordHeader[0] == '+') {
			// The "handshake" got an error or status reply.
			return &TLSMismatch{ServerTLS: false, Err: err}
		}
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return err // silent, not ended: a hung node, not a TLS port
	}
	ctx, cancel := context.WithTimeout(setupCtx{Context: context.Background(), done: p.setups.done}, p.timeout)
	defer cancel()
	if p.usesTLS() {
		if answersPlain(ctx, p.addr) {
			return &TLSMismatch{ServerTLS: false, Err: err}
		}
	} else if speaksTLS(ctx, p.addr) {
		return &TLSMismatch{ServerTLS: true, Err: err}
	}
	return err
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// watchSlowTLS asks the server, once a TLS connection's set-up has taken
// d, whether it answers plain commands: a handshake with a plain server
// waits until the client's DialTimeout, and the rounds that time out on
// the node meanwhile should say why, and count it as refused. stop cancels
// it.
func (p *Pipe) watchSlowTLS(d time.Duration) (stop func() bool) {
	if !p.probeTLS || !p.usesTLS() {
		return func() bool { return false }
	}
	return time.AfterFunc(d, func() {
		ctx, cancel := context.WithTimeout(setupCtx{Context: context.Background(), done: p.setups.done}, p.timeout)
		defer cancel()
		if answersPlain(ctx, p.addr) {
			p.cause.note(&TLSMismatch{ServerTLS: false, Err: errors.New("the TLS handshake got no answer")})
		}
	}).Stop
}

// answersPlain reports whether the server at addr answers a plain PING
// with a RESP reply (+PONG, or an error such as NOAUTH) within ctx.
func answersPlain(ctx context.Context, addr string) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }() // a probe: nothing to report
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl) // the reads below fail at it if not
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	b, err := bufio.NewReader(c).ReadByte()
	return err == nil && (b == '+' || b == '-')
}

// speaksTLS reports whether the server at addr completes a TLS handshake,
// or answers one with a TLS alert (a certificate it requires), within ctx.
// No certificate is checked: the answer only says which protocol it is.
func speaksTLS(ctx context.Context, addr string) bool {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a probe of the protocol, nothing is sent on it
	defer func() { _ = tc.Close() }()                          // a probe: nothing to report
	err = tc.HandshakeContext(ctx)
	var (
		alert  tls.AlertError
		remote *net.OpError
	)
	// A TLS alert from the server (it wants a client certificate, say)
	// comes as a "remote error".
	return err == nil || errors.As(err, &alert) || (errors.As(err, &remote) && remote.Op == "remote error")
}
