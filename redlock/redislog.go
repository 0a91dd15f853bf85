package redlock

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// go-redis writes some failures to a logger of its own ("redis: connection
// pool: failed to dial after 1 attempts: ..."), and it has only one, global
// to the process (redis.SetLogger); no client option chooses another, and
// the current one cannot be read back. The Locker's own connections would
// fill stderr with such lines whenever a node is down, though the Locker
// reports every node failure itself, in its errors.
//
// So the package offers a logger, RedisLogger, that tells the Locker's lines
// from the others' by a mark, and writes the others exactly as go-redis's
// default logger does. The mark is in the context go-redis passes along (the
// Locker's calls carry it) or, for a failed dial, which go-redis retries on
// a context of its own, in the error it quotes (the Locker's dialer wraps
// its errors). Installing it is the program's choice (the redlock command
// does): importing the package changes nothing in the process.

// Logger is go-redis's logging interface: what redis.SetLogger takes.
type Logger interface {
	Printf(ctx context.Context, format string, v ...any)
}

// RedisLogger returns a logger for redis.SetLogger that passes go-redis's
// lines on to next (nil: stderr, as go-redis's default logger), except those
// about a Locker's own connections: each goes to that Locker's
// WithRedisLogger, or nowhere. Importing the package leaves go-redis's
// logger alone; call redis.SetLogger(redlock.RedisLogger(nil)) to opt in.
func RedisLogger(next Logger) Logger {
	if next == nil {
		// The prefix and flags of go-redis's default logger.
		return &redisLogger{std: log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)}
	}
	return &redisLogger{next: next}
}

// WithRedisLogger sends go-redis's lines about the Locker's own connections
// to l (nil: dropped, the default) instead of dropping them.
func WithRedisLogger(l Logger) Option {
	return lockerOption(func(c *config) { c.redisLog = &conn.Route{To: l} })
}

// route returns the route of the Locker's go-redis lines.
func (c *config) route() *conn.Route {
	if c.redisLog == nil {
		return conn.Quiet
	}
	return c.redisLog
}

type redisLogger struct {
	next Logger
	std  *log.Logger
}

func (l *redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if r, ok := conn.RouteOf(ctx, v); ok {
		if r.To != nil {
			r.To.Printf(ctx, format, v...)
		}
		return
	}
	if l.next != nil {
		l.next.Printf(ctx, format, v...)
		return
	}
	// 3: this function, go-redis's forwarding logger, and the line that
	// logs, as go-redis's default logger counts.
	_ = l.std.Output(3, fmt.Sprintf(format, v...))
}
