package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// captureLogger keeps go-redis's log lines.
type captureLogger struct {
	mu    sync.Mutex
	lines []string
}

func (c *captureLogger) Printf(_ context.Context, format string, v ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, fmt.Sprintf(format, v...))
}

// about returns the lines that mention s.
func (c *captureLogger) about(s string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range c.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// go-redis's lines about a Locker's own connections go to its
// WithRedisLogger or nowhere; those of other clients pass on. Not
// parallel: it sets the process's go-redis logger.
func TestRedisLogger(t *testing.T) {
	global := &captureLogger{}
	redis.SetLogger(redlock.RedisLogger(global))
	t.Cleanup(func() { redis.SetLogger(redistest.QuietLogger{}) })

	port, err := redistest.FreePort() // nobody listens there
	if err != nil {
		t.Fatal(err)
	}
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	own := &captureLogger{}
	quiet, err := redlock.NewFromURLs([]string{"redis://" + dead}, testOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = quiet.Close() }()
	routed, err := redlock.NewFromURLs([]string{"redis://" + dead}, append(testOpts, redlock.WithRedisLogger(own))...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = routed.Close() }()
	for _, l := range []*redlock.Locker{quiet, routed} {
		if _, err := l.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNoQuorum) {
			t.Fatalf("TryObtain = %v, want ErrNoQuorum", err)
		}
	}
	if got := global.about(dead); len(got) != 0 {
		t.Errorf("the Lockers' lines reached the process's logger: %q", got)
	}
	if got := own.about(dead); len(got) == 0 {
		t.Error("WithRedisLogger's logger got no line about the dead node")
	}
	// Another client's line still passes.
	c := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialerRetries: 1})
	defer func() { _ = c.Close() }()
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("Ping of a dead node succeeded")
	}
	if got := global.about(dead); len(got) == 0 {
		t.Error("a plain client's line did not reach the process's logger")
	}

	// A call cannot take it: it is no LockOption.
	if _, ok := redlock.WithRedisLogger(own).(redlock.LockOption); ok {
		t.Error("WithRedisLogger is a LockOption: a call could take it")
	}
}

// The line of a node's failed dial reaches WithRedisLogger's logger with no
// RedisLogger installed too: the workers dial their nodes themselves, and
// the Locker writes that line in go-redis's words.
func TestRedisLoggerFailedDialWithout(t *testing.T) {
	port, err := redistest.FreePort() // nobody listens there
	if err != nil {
		t.Fatal(err)
	}
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	own := &captureLogger{}
	l, err := redlock.NewFromURLs([]string{"redis://" + dead}, append(testOpts, redlock.WithRedisLogger(own))...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	if _, err := l.TryObtain(t.Context(), "k"); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Fatalf("TryObtain = %v, want ErrNoQuorum", err)
	}
	got := own.about(dead)
	if len(got) == 0 || !strings.Contains(got[0], "redis: connection pool: failed to dial after 1 attempts: ") {
		t.Errorf("WithRedisLogger's logger got %q, want go-redis's line of a failed dial", got)
	}
}
