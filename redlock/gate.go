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

// line is the Locker's queue of goroutines that wait for one key (or one
// set of keys), and what they share about it; under gates.mu.
type line struct {
	// turn holds one token: the goroutine that takes it is the head of
	// the line, the only one that asks the nodes.
	turn chan struct{}
	// users counts the goroutines in the line, the head included; the
	// line is deleted when the last one leaves.
	users int
	// offer is the head's, while it sleeps between attempts: a Release by
	// this Locker may hand it the lock (see handoff.go).
	offer *offer
	// streak counts the handoffs of the key in a row.
	streak int
	// heldUntil, while not zero, is the validity deadline of the lock that
	// a goroutine got from this line and has not released yet.
	heldUntil time.Time
	// freed counts the locks got from this line that were let go,
	// released or handed over (see claimOffer, released): a waiter that
	// saw one held posts its offer only if none was let go since (see
	// postOffer).
	freed uint64
	// lastFailure is the error of the line's latest failed round: what a
	// waiter that gives up behind the others, without a round of its own,
	// reports (an outage must not read as contention).
	lastFailure *QuorumError
}

// postOffer offers the caller, the head of key's line, for a handoff. It
// reports false, posting nothing, when a lock got from the line was let go
// since the caller looked (seen, from freedCount): that release's poke
// found no offer, so the caller must try again at once.
func (g *gates) postOffer(key string, o *offer, seen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lines[key]
	if ln == nil {
		return true
	}
	if ln.freed != seen {
		return false
	}
	ln.offer = o
	return true
}

// freedCount returns how many locks got from key's line have been let go
// so far (0 without a line), for postOffer.
func (g *gates) freedCount(key string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ln := g.lines[key]; ln != nil {
		return ln.freed
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

// claimOffer is called by a Release of a lock on key: it counts the lock
// as let go and takes the offer of the line's head for a handoff, if there
// is one and its kind takes handoffs. After maxHandoffs handoffs of the key
// in a row it takes none and reports fair: the release must be a real one,
// announced to every waiter at once.
func (g *gates) claimOffer(key string) (o *offer, fair bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lines[key]
	if ln != nil {
		ln.heldUntil = time.Time{} // the lock is being let go
		ln.freed++
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
	ln.freed++
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
		g.leaveLine(key, ln)
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
		g.leaveLine(key, ln)
		return nil, true, ctx.Err()
	}
}

// leaveLine takes a goroutine out of ln, key's line, and deletes the line
// when it was the last.
func (g *gates) leaveLine(key string, ln *line) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln.users--
	if ln.users == 0 {
		delete(g.lines, key)
	}
}

// markHeld records that a goroutine of the line got the lock on key, valid
// until the given time (the next need not ask the nodes before).
func (g *gates) markHeld(key string, until time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ln := g.lines[key]; ln != nil {
		ln.heldUntil = until
		ln.lastFailure = nil // the line's latest news is a success
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

// recordFailure keeps qe, the error of a failed round of a goroutine in
// key's line, as the line's latest news (see lastFailure).
func (g *gates) recordFailure(key string, qe *QuorumError) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ln := g.lines[key]; ln != nil {
		ln.lastFailure = qe
	}
}

// lastFailure returns a copy of the error of the latest failed round
// recorded in key's line, or nil when there is none or a lock was got
// since.
func (g *gates) lastFailure(key string) *QuorumError {
	g.mu.Lock()
	defer g.mu.Unlock()
	ln := g.lines[key]
	if ln == nil || ln.lastFailure == nil {
		return nil
	}
	qe := *ln.lastFailure
	qe.Nodes = slices.Clone(qe.Nodes)
	return &qe
}
