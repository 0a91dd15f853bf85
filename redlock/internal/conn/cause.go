package conn

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
)

// SingleLine makes text from outside the library (a server's error reply, an
// address, a dial error) safe in a one-line message: control characters,
// newlines among them, are escaped as %q would escape them.
func SingleLine(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lastCause remembers why a node's last connection attempt failed (a
// refused dial, a DNS lookup, a TLS handshake, a refused password), until a
// connection opens. A round that times out on the node reports that cause
// with the timeout: the dial of a node whose handshake hangs fails at the
// same deadline that decides the round, so its own error usually arrives
// just after the round gave up on it.
type lastCause struct {
	mu  sync.Mutex
	err error
	gen uint64 // counts notes
}

// note records err as the node's cause; nil clears it (a connection opened).
func (c *lastCause) note(err error) {
	c.mu.Lock()
	c.err = err
	c.gen++
	c.mu.Unlock()
}

// slowSetUp makes a set-up that begins now the node's cause once it has
// taken d, unless its outcome (or anything else) is noted first: a round
// that times out on the node meanwhile then says that a connection is
// still being set up. stop cancels it.
func (c *lastCause) slowSetUp(d time.Duration) (stop func() bool) {
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	return time.AfterFunc(d, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.gen == gen {
			c.err = &setUpUnderWay{after: d}
		}
	}).Stop
}

// setUpUnderWay is the cause of a node whose new connection (dial, TLS
// handshake, set-up) is still under way after the node timeout.
type setUpUnderWay struct{ after time.Duration }

func (e *setUpUnderWay) Error() string {
	return "a new connection is still being set up after " + e.after.String() + " (it may take the client's DialTimeout)"
}

// get is the recorded cause, or nil.
func (c *lastCause) get() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// timeoutError is a node timeout whose likely cause is known: the error
// that failed the node's last connection attempt. It matches both
// quorum.ErrTimeout and the cause.
type timeoutError struct{ cause error }

func (e *timeoutError) Error() string {
	var slow *setUpUnderWay
	if errors.As(e.cause, &slow) {
		return "no reply within the node timeout; " + slow.Error()
	}
	return "no reply within the node timeout; the last connection attempt failed: " + SingleLine(e.cause.Error())
}

func (e *timeoutError) Unwrap() []error { return []error{quorum.ErrTimeout, e.cause} }

// WithCause adds the node's known connection failure to a timeout error,
// and to a connection's error (a reset, a broken pipe: no reply of the
// server's) when that failure is one no retry mends (Permanent): the
// connection the call used ended for it.
func (p *Pipe) WithCause(err error) error {
	if err == nil {
		return err
	}
	c := &p.cause
	var te *timeoutError
	if errors.As(err, &te) {
		return err
	}
	cause := c.get()
	var reply redis.Error
	switch {
	case cause == nil || errors.Is(err, cause):
		// No cause, or err is the cause itself (the batch failed on it).
	case errors.Is(err, quorum.ErrTimeout):
		return &timeoutError{cause: cause}
	case Permanent(cause) && !errors.As(err, &reply):
		return &connCauseError{err: err, cause: cause}
	}
	return err
}

// connCauseError is a connection's error whose likely cause is the node's
// last connection failure. It matches both.
type connCauseError struct{ err, cause error }

func (e *connCauseError) Error() string {
	return SingleLine(e.err.Error()) + "; the last connection attempt failed: " + SingleLine(e.cause.Error())
}

func (e *connCauseError) Unwrap() []error { return []error{e.err, e.cause} }

// Permanent reports whether a node's error is a refusal that no retry
// mends: a wrong or missing password, a missing ACL permission (for a
// command of ours or one a script runs), a command the server does not
// know, a database index the server does not have, a client and server
// that disagree about TLS (TLSMismatch). Told by the server's error codes and texts, wherever the error
// met them (a command's reply, the handshake, the last connection attempt
// behind a timeout).
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	var mismatch *TLSMismatch
	if errors.As(err, &mismatch) {
		return true
	}
	msg := err.Error()
	if strings.Contains(msg, "DB index is out of range") {
		return true // SELECT of a database the server does not have
	}
	for _, code := range []string{"WRONGPASS", "NOAUTH", "NOPERM"} {
		if strings.Contains(msg, code) {
			return true
		}
	}
	lower := strings.ToLower(msg)
	return strings.Contains(lower, "can't run this command") || // a script's command the ACL denies
		strings.Contains(lower, "unknown command") ||
		strings.Contains(lower, "unknown redis command") // called from a script
}
