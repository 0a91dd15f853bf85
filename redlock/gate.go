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
	// lets counts the locks got from this line that were let go (see
	// claim, released): a waiter that saw one held posts its offer only
	// if none was let go since (see post).
	lets uint64
	// last is the outcome of the line's latest failed round: what a
	// waiter that gives up behind the others, without a round of its own,
	// reports (an outage must not read as contention).
	last *QuorumError
}

// post offers the caller, the head of key's line, for a handoff, unless a
// lock got from the line was let go since the caller looked (seen, from
// letGo): its poke went to no offer, and post reports false (try again at
// once).
func (g *gates) post(key string, o *offer, seen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lines[key]
	if ln == nil {
		return true
	}
	if ln.lets != seen {
		return false
	}
	ln.offer = o
	return true
}

// letGo is key's count of locks let go, for post.
func (g *gates) letGo(key string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ln := g.lines[key]; ln != nil {
		return ln.lets
	}
	return 0
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
		ln.lets++
	}
	switch {
	case ln == nil:
		return nil, false
	case ln.offer == nil || !ln.offer.a.kind.handoff:
		// None waits, or its kind takes no handoff (a reader's or a
		// writer's of a read-write lock, behind a lock on its key): it
		// is poked instead (released).
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
	ln.lets++
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

// busy reports whether goroutines already wait for key; a newcomer then
// queues behind them instead of trying first (no barging).
func (g *gates) busy(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.lines[key]
	return ok
}

// enter waits for the caller's turn to contend for key, or for ctx to end;
// waited reports whether others were ahead. leave ends the turn.
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

// hold records that a goroutine of the line got the lock on key, valid
// until the given time (the next need not ask the nodes before).
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
