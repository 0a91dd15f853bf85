package conn

import (
	"errors"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/quorum"
)

// A timeout or a connection's error that carries the node's last
// connection failure prints as one line, matches both, and names the
// cause only when it is known.
func TestWithCause(t *testing.T) {
	cause := errors.New("WRONGPASS invalid username-password pair\nsecond line")
	broken := errors.New("write: broken pipe")
	p := &Pipe{}
	if err := p.WithCause(quorum.ErrTimeout); err != quorum.ErrTimeout {
		t.Fatalf("no cause known: %v, want the timeout as it is", err)
	}
	p.cause.note(cause)
	for name, err := range map[string]error{
		"timeout": p.WithCause(quorum.ErrTimeout),
		"broken":  p.WithCause(broken),
	} {
		if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, "WRONGPASS") {
			t.Errorf("%s: %q is not one line naming the cause", name, msg)
		}
		if !errors.Is(err, cause) {
			t.Errorf("%s: %v does not match its cause", name, err)
		}
	}
	if err := p.WithCause(quorum.ErrTimeout); !errors.Is(err, quorum.ErrTimeout) {
		t.Errorf("%v does not match quorum.ErrTimeout", err)
	}
	if err := p.WithCause(broken); !errors.Is(err, broken) {
		t.Errorf("%v does not match the connection's error", err)
	}
	p.cause.note(nil)
	if err := p.WithCause(broken); err != broken {
		t.Errorf("cause cleared: %v, want the error as it is", err)
	}
}
