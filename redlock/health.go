package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// NodeState is what a node's last answer said about it.
type NodeState int

// The states of a node. Every state but NodeUp and NodeUnknown keeps the
// node's vote out of the locks.
const (
	NodeUnknown       NodeState = iota // not heard from yet
	NodeUp                             // answered (granted, refused as held, released, ...)
	NodeDown                           // failed: refused, reset, timed out, unreachable
	NodeReplica                        // refused as a replica (READONLY): give masters only
	NodeMisconfigured                  // refuses for good: a password, an ACL, a database, TLS
	NodeAbstaining                     // the restart guard keeps it out of the votes
	NodeSameServer                     // reaches the same server as another node: it does not vote
)

// String names the state as log lines and Health show it.
func (s NodeState) String() string {
	switch s {
	case NodeUnknown:
		return "unknown"
	case NodeUp:
		return "up"
	case NodeDown:
		return "down"
	case NodeReplica:
		return "replica"
	case NodeMisconfigured:
		return "misconfigured"
	case NodeAbstaining:
		return "abstaining"
	case NodeSameServer:
		return "same server as another node"
	}
	return fmt.Sprintf("NodeState(%d)", int(s))
}

// NodeHealth is one node's last known state.
type NodeHealth struct {
	Addr  string    // the node's address, credentials removed
	State NodeState // what its last answer said
	Err   error     // the error of its last answer, unless NodeUp or NodeUnknown
	Since time.Time // when it entered State (zero for NodeUnknown)
}

// Health is the Locker's view of its nodes, from their last answers.
type Health struct {
	Nodes []NodeHealth // one per node, in the clients' order
	// Spare is how many more nodes may fail before no lock can be
	// obtained: the nodes up (or not heard from yet) less the quorum.
	// Negative: a majority is out now.
	Spare int
}

// Health returns each node's last known state, from the answers of the
// calls made so far; it asks no node. Safe for concurrent use.
func (l *Locker) Health() Health {
	h := Health{Nodes: make([]NodeHealth, len(l.nodes))}
	l.health.mu.Lock()
	defer l.health.mu.Unlock()
	up := 0
	for i, n := range l.nodes {
		nh := NodeHealth{Addr: n.addr}
		if i < len(l.health.nodes) {
			s := l.health.nodes[i]
			nh.State, nh.Err, nh.Since = s.state, s.err, s.since
		}
		if nh.State == NodeUp || nh.State == NodeUnknown {
			up++
		}
		h.Nodes[i] = nh
	}
	h.Spare = up - l.need
	return h
}

// healthTracker keeps each node's last known state and logs its changes.
type healthTracker struct {
	mu    sync.Mutex
	nodes []nodeHealth
	// closed is set by Close: what fails from then on is no news of the
	// nodes. (Not the Locker's mu: a round's replies come while an
	// operation holds it, and Close waits for it.)
	closed atomic.Bool
}

type nodeHealth struct {
	state NodeState
	err   error
	since time.Time
}

// stateOf is the state a node's answer says it is in; ok is false for an
// answer that says nothing of the node (a call never sent).
func stateOf(err error) (s NodeState, ok bool) {
	switch {
	case err == nil:
		return NodeUp, true
	case errors.Is(err, conn.ErrShed) && !errors.Is(err, conn.ErrSilent):
		return 0, false
	case conn.SlotMoving(err):
		// One slot of a cluster moved or is moving: the node answers.
		return 0, false
	case isSizeReply(err):
		// The caller's semaphore size differs from the node's: the
		// node answers, the call was wrong.
		return 0, false
	case errors.Is(err, conn.ErrSameServer):
		return NodeSameServer, true
	case errors.Is(err, ErrAbstained):
		return NodeAbstaining, true
	case strings.Contains(err.Error(), "READONLY"):
		return NodeReplica, true
	case conn.Permanent(err) || errors.Is(err, ErrInvalid):
		return NodeMisconfigured, true
	}
	return NodeDown, true
}

// noteNode records node i's answer (err nil: it answered) and logs a
// change of its state at Warn, with how many more failures the locks
// survive.
func (l *Locker) noteNode(i int, err error) {
	s, ok := stateOf(err)
	if !ok || (err != nil && l.health.closed.Load()) {
		// Nothing said of the node, or its call failed because Close
		// ended its connection's set-up.
		return
	}
	t := &l.health
	t.mu.Lock()
	if t.nodes == nil {
		t.nodes = make([]nodeHealth, len(l.nodes))
	}
	prev := t.nodes[i].state
	if prev == s {
		t.nodes[i].err = err
		t.mu.Unlock()
		return
	}
	t.nodes[i] = nodeHealth{state: s, err: err, since: time.Now()}
	up := 0
	for _, n := range t.nodes {
		if n.state == NodeUp || n.state == NodeUnknown {
			up++
		}
	}
	t.mu.Unlock()
	if prev == NodeUnknown && s == NodeUp {
		return // the first answer of a node that works: nothing to say
	}
	msg := "redlock: node " + s.String()
	if s == NodeUp {
		msg = "redlock: node back"
	}
	attrs := []any{slog.String("node", l.nodes[i].addr), slog.String("was", prev.String()), slog.Int("spare", up-l.need)}
	if err != nil {
		attrs = append(attrs, slog.String("err", nodeErrText(l.nodes[i].pipe.WithCause(err))))
	}
	l.cfg.logger.Log(context.Background(), slog.LevelWarn, msg, attrs...)
}

// outageWatch follows one Obtain's failed attempts: once they have failed
// for want of a quorum (not for contention) for longer than the Locker's
// outage bound in a row, it logs at Warn, and again every bound while the
// outage lasts.
type outageWatch struct {
	began, logged time.Time
}

// note takes an attempt's error (nil: the wait ends).
func (w *outageWatch) note(a *acquisition, err error) {
	var qe *QuorumError
	if err == nil || !errors.Is(err, ErrNoQuorum) || (errors.As(err, &qe) && qe.contended()) {
		w.began = time.Time{}
		return
	}
	now := time.Now()
	if w.began.IsZero() {
		w.began = now
		return
	}
	bound := a.l.cfg.outageLog
	if now.Sub(w.began) < bound || now.Sub(w.logged) < bound {
		return
	}
	w.logged = now
	a.l.cfg.logger.Log(context.Background(), slog.LevelWarn, "redlock: waiting out an outage",
		slog.String("key", quoteKey(a.name)), slog.Duration("waited", now.Sub(w.began).Round(time.Millisecond)),
		slog.String("err", err.Error()))
}
