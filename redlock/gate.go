package redlock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/clock"
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
	// offer is the head's, while it sleeps between attempts: a Release by
	// this Locker may hand it the lock (see handoff.go).
	offer *offer
	// streak counts the handoffs of the key in a row.
	streak int
	// heldUntil, while not zero, is the validity deadline of the lock that
	// a goroutine got from this line and has not released yet.
	heldUntil time.Time
	// last is the outcome of the line's latest failed round: what a
	// waiter that gives up behind the others, without a round of its own,
	// reports (an outage must not read as contention).
	last *QuorumError
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

// post offers the caller, the head of key's line, for a handoff.
func (g *gates) post(key string, o *offer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ln := g.lines[key]; ln != nil {
		ln.offer = o
	}
}

// withdraw takes the offer back. It reports false when a Release claimed it
// first: the handoff is under way and its outcome comes on o.done.
func (g *gates) withdraw(key string, o *offer) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ln := g.lines[key]; ln != nil && ln.offer == o {
		ln.offer = nil
		return true
	}
	return false
}

// claim takes the offer of key's head for a handoff, unless the key has been
// handed over maxHandoffs times in a row: then fair reports that the
// release must be a real one, announced to every waiter at once.
func (g *gates) claim(key string) (o *offer, fair bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lines[key]
	if ln != nil {
		ln.heldUntil = time.Time{} // the lock is being let go
	}
	switch {
	case ln == nil:
		return nil, false
	case ln.offer == nil:
		ln.streak = 0
		return nil, false
	case ln.streak >= maxHandoffs:
		ln.streak = 0
		return nil, true
	}
	o, ln.offer = ln.offer, nil
	ln.streak++
	return o, false
}

// hold records that a goroutine of the line got the lock on key, valid until
// the given time: the next in line need not ask the nodes before that, or
// before its release.
func (g *gates) hold(key string, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ln := g.lines[key]; ln != nil {
		ln.heldUntil = until
		ln.last = nil // the line's latest news is a success
	}
}

// heldFor reports whether a lock on key got from the line is still held by
// this Locker, and for how much longer it is valid by clk.
func (g *gates) heldFor(key string, clk clock.Clock) (time.Duration, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lines[key]
	if ln == nil || ln.heldUntil.IsZero() {
		return 0, false
	}
	left := ln.heldUntil.Sub(clk.Now())
	return left, left > 0
}

// released notes that a lock on key was let go by this Locker (not handed
// over) and pokes the head of the line, if it waits, to try at once.
func (g *gates) released(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lines[key]
	if ln == nil {
		return
	}
	ln.heldUntil = time.Time{}
	ln.offer.wake()
}

// pokeAll pokes the head of every line (the Locker is closing).
func (g *gates) pokeAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ln := range g.lines {
		ln.offer.wake()
	}
}

// note records the failed round of a goroutine in key's line.
func (g *gates) note(key string, qe *QuorumError) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ln := g.lines[key]; ln != nil {
		ln.last = qe
	}
}

// last returns a copy of the latest failed round noted in key's line, or
// nil.
func (g *gates) last(key string) *QuorumError {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lines[key]
	if ln == nil || ln.last == nil {
		return nil
	}
	qe := *ln.last
	qe.Nodes = slices.Clone(qe.Nodes)
	return &qe
}
