package redlock

import (
	"context"
	"sync"
)

// gates line up the goroutines of one Locker that wait for the same key:
// only the head of the line contends on the nodes, the others wait in
// process, in arrival order. Without it, every release would wake all local
// waiters at once, their acquisitions would race on each node, split the
// votes so that none reached a majority, and all back off: a herd that is
// slow and unfair. A line exists only while someone waits on its key.
type gates struct {
	mu    sync.Mutex
	lines map[string]*line
}

type line struct {
	turn  chan struct{} // holds one token: whoever takes it contends
	users int
}

// busy reports whether goroutines already wait for key; a newcomer then
// queues behind them instead of trying first (no barging).
func (g *gates) busy(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.lines[key]
	return ok
}

// enter waits for the caller's turn to contend for key, or for ctx to end;
// waited reports whether others were ahead. On success the caller must call
// the returned leave when it stops contending (it got the lock or gave up).
func (g *gates) enter(ctx context.Context, key string) (leave func(), waited bool, err error) {
	g.mu.Lock()
	if g.lines == nil {
		g.lines = map[string]*line{}
	}
	ln := g.lines[key]
	if ln == nil {
		ln = &line{turn: make(chan struct{}, 1)}
		ln.turn <- struct{}{}
		g.lines[key] = ln
	}
	ln.users++
	g.mu.Unlock()

	leave = func() {
		ln.turn <- struct{}{}
		g.out(key, ln)
	}
	select {
	case <-ln.turn:
		return leave, false, nil
	default:
	}
	// Blocked receivers of a channel are served in arrival order.
	select {
	case <-ln.turn:
		return leave, true, nil
	case <-ctx.Done():
		g.out(key, ln)
		return nil, true, ctx.Err()
	}
}

func (g *gates) out(key string, ln *line) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln.users--
	if ln.users == 0 {
		delete(g.lines, key)
	}
}
