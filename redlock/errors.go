package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// The sentinel errors; errors.Is matches them, and errors.As finds a
// *QuorumError with each node's outcome (docs/safety.md#what-the-errors-say).
var (
	// ErrNotObtained: others hold the key on too many nodes: contention.
	ErrNotObtained = errors.New("redlock: not obtained")
	// ErrNoQuorum: a majority of nodes could not be reached in time: an outage.
	ErrNoQuorum = errors.New("redlock: no quorum")
	// ErrLockNotHeld: not ours on a majority; matched by the three below.
	ErrLockNotHeld = errors.New("redlock: lock not held")
	// ErrLockExpired: our keys are gone, and nobody else holds the key.
	ErrLockExpired error = &notHeldError{"redlock: lock not held: expired"}
	// ErrLockLost: another owner holds the lock now.
	ErrLockLost error = &notHeldError{"redlock: lock not held: taken by another owner"}
	// ErrReleased: the Lock was released already; no node is asked.
	ErrReleased error = &notHeldError{"redlock: lock not held: released"}
	// ErrInvalid: bad input (keys, options, clients, nodes on one server).
	ErrInvalid = errors.New("redlock: invalid argument")
	// ErrClosed is returned by operations on a Locker after Close.
	ErrClosed = errors.New("redlock: locker closed")
	// ErrMisconfigured: nodes refuse our commands for good (password, ACL).
	ErrMisconfigured = errors.New("redlock: misconfigured: nodes refuse the library's commands")
	// ErrAbstained matches a node's error (NodeResult.Err) when the node
	// abstained under the restart guard: it may have forgotten locks (a
	// restart, reload, promotion, eviction or flush) within the guard's
	// maximum TTL, was never bootstrapped, or may evict keys.
	ErrAbstained = errors.New("redlock: node abstains")
)

// another node reaches too.
func invalidNode(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, conn.ErrSameServer)
}

// SizeError is the error of a semaphore's call whose size is not the size
// that live permits (or an attempt) of the semaphore have on a node; it
// matches ErrInvalid, and is never retried: one size is a configuration
// to fix.
type SizeError struct {
	Name string // the semaphore's name
	Size int    // the size a node keeps for it
	Want int    // the size of the failed call
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("%v: semaphore %s is in use with size %d, not %d", ErrInvalid, quoteKey(e.Name), e.Size, e.Want)
}

// Is reports whether target is ErrInvalid.
func (e *SizeError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Outcome is what one node did in a quorum round.
type Outcome int

// The outcomes.
const (
	OutcomeNoReply     Outcome = iota // not needed: the round was decided before its answer
	OutcomeOK                         // granted, released, extended or reported our lock
	OutcomeHeldByOther                // another owner holds the key on the node
	OutcomeMissing                    // the key is not on the node
	OutcomeError                      // the call failed: network, timeout, server error, bad reply
)

// String names the outcome as error messages show it.
func (o Outcome) String() string {
	switch o {
	case OutcomeNoReply:
		return "not needed (decided before its answer)"
	case OutcomeOK:
		return "ok"
	case OutcomeHeldByOther:
		return "held by another"
	case OutcomeMissing:
		return "missing"
	case OutcomeError:
		return "error"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// NodeResult is one node's part in a quorum round.
type NodeResult struct {
	Addr     string        // the node's address, credentials removed
	Replica  bool          // the node said it is a replica (it votes no) when its connection opened
	Outcome  Outcome       // what the node did
	TTL      time.Duration // the holder's time left (-1: no expiry) if held by another; ours in a TTL query
	Err      error         // the error if OutcomeError; a timeout matches quorum.ErrTimeout
	Metadata string        // the holder's metadata if held by another and Obtain gave up ("" from TryObtain)
}

// QuorumError reports a quorum round that failed, node by node. It matches
// the sentinel that says why (see Unwrap).
type QuorumError struct {
	Op    string       // the operation: "obtain", "release", "extend", "ttl", "inspect", ...
	Key   string       // the lock key
	Need  int          // how many nodes had to agree
	Nodes []NodeResult // one per node, in the clients' order; empty when no node was asked

	reason error
	// split is set on a failed acquisition that some node granted: the
	// key was free there (a release on its way, say).
	split bool
}

// newQuorumError is the error of a round that failed for reason (one of
// the sentinels QuorumError.Unwrap names), with each node's outcome; nodes
// is empty when no node was asked.
func newQuorumError(op, key string, need int, nodes []NodeResult, reason error) *QuorumError {
	return &QuorumError{Op: op, Key: key, Need: need, Nodes: nodes, reason: reason}
}

// roundError is the error of a failed round of l, its replies turned into
// node outcomes by outcome.
func (l *Locker) roundError(op, key string, res *quorum.Result[int64], outcome func(quorum.Reply[int64]) NodeResult, reason error) *QuorumError {
	return newQuorumError(op, key, l.need, l.nodeResults(res, outcome), reason)
}

// nodeResults turns a round's replies into node outcomes, with the nodes'
// addresses.
func (l *Locker) nodeResults(res *quorum.Result[int64], outcome func(quorum.Reply[int64]) NodeResult) []NodeResult {
	nodes := make([]NodeResult, len(l.nodes))
	for i, r := range res.Replies {
		nr := outcome(r)
		nr.Addr, nr.Replica = l.nodes[i].addr, l.nodes[i].pipe.Replica()
		nr.Err = l.nodes[i].pipe.WithCause(nr.Err)
		nodes[i] = nr
	}
	return nodes
}

// notHeld is the error of a failed release, extend or TTL round: an outage
// that hides a possible majority (a majority that answered too late to
// leave any validity among them) is ErrNoQuorum; otherwise the lock is not
// ours on a majority, lost if another owner holds it anywhere, else expired.
func (l *Locker) notHeld(op, key string, res *quorum.Result[int64]) *QuorumError {
	nodes := l.nodeResults(res, compareOutcome)
	reason := ErrLockExpired
	switch {
	case res.Yes+res.Failed+res.Pending() >= l.need:
		reason = ErrNoQuorum
	case slices.ContainsFunc(nodes, func(n NodeResult) bool { return n.Outcome == OutcomeHeldByOther }):
		reason = ErrLockLost
	}
	return newQuorumError(op, key, l.need, nodes, reason)
}

// Error describes the round in one line, with each node's outcome.
func (e *QuorumError) Error() string {
	var b strings.Builder
	ok := 0
	for _, n := range e.Nodes {
		if n.Outcome == OutcomeOK {
			ok++
		}
	}
	if len(e.Nodes) == 0 {
		// No node was asked: the call waited in this Locker's line.
		return fmt.Sprintf("%s: %s: waited behind this Locker's own holder or waiters", replyText(e.reason.Error()), e.subject())
	}
	fmt.Fprintf(&b, "%s: %s: %d of %d nodes ok, %d needed", replyText(e.why().Error()), e.subject(), ok, len(e.Nodes), e.Need)
	for i, n := range e.Nodes {
		if i == 0 {
			b.WriteString(" [")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(conn.SingleLine(n.Addr))
		if n.Replica {
			b.WriteString(" (a replica, not a master: give masters only)")
		}
		b.WriteByte(' ')
		b.WriteString(n.Outcome.String())
		switch {
		case n.Outcome == OutcomeHeldByOther:
			var notes []string
			if n.Metadata != "" {
				notes = append(notes, "holder "+holderText(n.Metadata))
			}
			if n.TTL >= 0 {
				notes = append(notes, fmt.Sprintf("%v left", n.TTL.Round(time.Millisecond)))
			}
			if len(notes) > 0 {
				b.WriteString(" (" + strings.Join(notes, ", ") + ")")
			}
		case n.Outcome == OutcomeError && n.Err != nil:
			b.WriteString(": ")
			b.WriteString(nodeErrText(n.Err))
		}
	}
	if len(e.Nodes) > 0 {
		b.WriteByte(']')
	}
	return b.String()
}

// subject is the operation and its key; a round about no key (bootstrap)
// names none.
func (e *QuorumError) subject() string {
	if e.Key == "" {
		return e.Op
	}
	return e.Op + " " + userKey(e.Key)
}

// Unwrap returns the reason: ErrNotObtained, ErrNoQuorum, ErrLockExpired
// or ErrLockLost; ErrMisconfigured, or ErrInvalid (two nodes reach one
// server), which no retry mends.
func (e *QuorumError) Unwrap() error { return e.why() }

// why is the reason, unless a node's error is the caller's mistake, or
// nodes that refuse the commands for good keep a majority out of reach.
func (e *QuorumError) why() error {
	if e.misconfigured() {
		return ErrInvalid
	}
	if len(e.Nodes) > 0 && e.refusing() > len(e.Nodes)-e.Need {
		return ErrMisconfigured
	}
	return e.reason
}

// refusing counts the nodes whose error is a permanent refusal, or a
// replica's (READONLY): a node given as a master that is a replica. One
// may be a failover's moment; a majority is a configuration to fix, not
// an outage to wait out.
func (e *QuorumError) refusing() int {
	n := 0
	for _, r := range e.Nodes {
		if r.Outcome == OutcomeError && (conn.Permanent(r.Err) || strings.Contains(r.Err.Error(), "READONLY")) {
			n++
		}
	}
	return n
}

// misconfigured reports whether a node's error matches ErrInvalid.
func (e *QuorumError) misconfigured() bool {
	for _, n := range e.Nodes {
		if n.Err != nil && invalidNode(n.Err) {
			return true
		}
	}
	return false
}

// contended reports whether another owner's hold had a part in the failed
// round: it failed for contention, or a node refused it as held by another
// (an outage may then have done the rest: a split vote with a node down,
// a holder whose majority counts a node that has failed since). Its waiter
// then waits as for contention: for the release, the holder's expiry, or
// the split's undo, rather than only its retry strategy's next delay.
func (e *QuorumError) contended() bool {
	if errors.Is(e.reason, ErrNotObtained) {
		return true
	}
	for _, n := range e.Nodes {
		if n.Outcome == OutcomeHeldByOther {
			return true
		}
	}
	return false
}

// freeIn estimates when the key may be free on enough nodes for a majority:
// the time until the last of the holder's keys that must expire does, from a
// failed obtain round. It reports false when that cannot be known (a holder
// key without expiry, or a round not lost to contention).
func (e *QuorumError) freeIn() (time.Duration, bool) {
	var held []time.Duration
	for _, n := range e.Nodes {
		if n.Outcome == OutcomeHeldByOther {
			if n.TTL < 0 {
				return 0, false
			}
			held = append(held, n.TTL)
		}
	}
	// Of the nodes held by others, all but (nodes - need) must clear.
	k := len(held) - (len(e.Nodes) - e.Need)
	if k <= 0 {
		return 0, false
	}
	slices.Sort(held)
	return held[k-1], true
}

// errNotTried marks the error of an acquisition that asked no node because
// its context had ended before it began.
var errNotTried = errors.New("redlock: context ended before any node was asked")

// withContext joins the context's error to err unless it is there already.
func withContext(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return &ctxError{err: err, ctx: cerr}
	}
	return err
}

// ctxError is errors.Join of an error and its context's, on one line: a
// message that a CLI or a log prints must not break in two.
type ctxError struct{ err, ctx error }

func (e *ctxError) Error() string   { return e.err.Error() + ": " + e.ctx.Error() }
func (e *ctxError) Unwrap() []error { return []error{e.err, e.ctx} }
