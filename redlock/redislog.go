package redlock

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
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
// log lines on to next, except those about the connections of a Locker:
// each of those goes to that Locker's WithRedisLogger, or nowhere. A nil
// next writes to stderr as go-redis's default logger does.
//
// Importing the package leaves go-redis's logger alone: call
// redis.SetLogger(redlock.RedisLogger(nil)) once, early, to keep the
// Locker's lines off stderr, or wrap a logger of your own in it.
func RedisLogger(next Logger) Logger {
	if next == nil {
		// The prefix and flags of go-redis's default logger.
		return &redisLogger{std: log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)}
	}
	return &redisLogger{next: next}
}

// WithRedisLogger sends go-redis's log lines about the Locker's own
// connections (failed dials, mostly) to l instead of dropping them, as long
// as the process's go-redis logger is a RedisLogger. Default: dropped under
// a RedisLogger (go-redis's own logger writes them to stderr); the Locker's
// errors report every node failure. It is a property of the Locker: give it to New or
// NewFromURLs; a nil l keeps the default.
func WithRedisLogger(l Logger) Option {
	return func(c *config) { c.redisLog = &redisRoute{to: l} }
}

// redisRoute is where the lines about one Locker's connections go: to, or
// nowhere when to is nil. Contexts of the Locker's calls carry it.
type redisRoute struct{ to Logger }

// quietRoute is the route of a Locker without WithRedisLogger.
var quietRoute = &redisRoute{}

// routeKey is the context key of a *redisRoute.
type routeKey struct{}

// route returns the route of the Locker's go-redis lines.
func (c *config) route() *redisRoute {
	if c.redisLog == nil {
		return quietRoute
	}
	return c.redisLog
}

type redisLogger struct {
	next Logger
	std  *log.Logger
}

// routedError is an error of a Locker's dialer, marked with its route.
// Its message is the error's own.
type routedError struct {
	err   error
	route *redisRoute
}

func (e *routedError) Error() string { return e.err.Error() }
func (e *routedError) Unwrap() error { return e.err }

// Timeout keeps the answer of a net.Error, which go-redis asks for without
// unwrapping.
func (e *routedError) Timeout() bool {
	var ne net.Error
	return errors.As(e.err, &ne) && ne.Timeout()
}

// routeDial returns dial with its errors marked with r.
func routeDial(dial func(context.Context, string, string) (net.Conn, error), r *redisRoute) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, &routedError{err: err, route: r}
		}
		return c, nil
	}
}

// routeOf returns the route of a line that go-redis logs with ctx and v.
func routeOf(ctx context.Context, v []any) (*redisRoute, bool) {
	if ctx != nil {
		if r, ok := ctx.Value(routeKey{}).(*redisRoute); ok {
			return r, true
		}
	}
	for _, a := range v {
		var re *routedError
		if err, ok := a.(error); ok && errors.As(err, &re) {
			return re.route, true
		}
	}
	return nil, false
}

func (l *redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if r, ok := routeOf(ctx, v); ok {
		if r.to != nil {
			r.to.Printf(ctx, format, v...)
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
