package conn

import (
	"context"
	"errors"
	"net"
)

// Route is where go-redis's log lines about one Locker's connections go:
// To, or nowhere when To is nil. Contexts of the Locker's calls carry it,
// and so do the errors of its dialers (go-redis logs a failed dial with a
// context of its own).
type Route struct {
	To interface {
		Printf(ctx context.Context, format string, v ...any)
	}
}

// Quiet is the route of a Locker whose lines go nowhere.
var Quiet = &Route{}

// routeKey is the context key of a *Route: the workers' contexts carry
// one (see deadlineCtx).
type routeKey struct{}

// routedError is an error of a Locker's dialer, marked with its route.
// Its message is the error's own.
type routedError struct {
	err   error
	route *Route
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
func routeDial(dial func(context.Context, string, string) (net.Conn, error), r *Route) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, &routedError{err: err, route: r}
		}
		return c, nil
	}
}

// RouteOf returns the route of a line that go-redis logs with ctx and v.
func RouteOf(ctx context.Context, v []any) (*Route, bool) {
	if ctx != nil {
		if r, ok := ctx.Value(routeKey{}).(*Route); ok {
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
