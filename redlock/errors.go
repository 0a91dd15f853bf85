package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/conn"

	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/quorum"
)

var (
	// ErrNotObtained means the lock is held by others on enough nodes that a
	// majority could not be had: contention, not an outage.
	ErrNotObtained = errors.New("redlock: not obtained")

	// ErrNoQuorum means a majority of nodes could not be reached or did not
	// answer in time: an outage, not contention.
	ErrNoQuorum = errors.New("redlock: no quorum")

	// ErrLockNotHeld means Release, Extend or TTL found the lock not held by us
	// on a majority of nodes. Such errors also match ErrLockExpired or
	// ErrLockLost, which tell why.
	ErrLockNotHeld = errors.New("redlock: lock not held")

	// ErrLockExpired means our keys are gone: the lock was held past its TTL,
	// but nobody else has taken it. It matches ErrLockNotHeld. When a
	// ForceRelease through the same Locker removed the keys, the error
	// still matches it, and its text says so instead of "expired".
	ErrLockExpired error = &notHeldError{"redlock: lock not held: expired"}

	// ErrLockLost means another owner holds the lock now. It matches
	// ErrLockNotHeld.
	ErrLockLost error = &notHeldError{"redlock: lock not held: taken by another owner"}

	// ErrInvalid is matched by every error about bad input: an empty key, a
	// TTL not above the drift, a bad option value, a nil or duplicate client,
	// two clients that reach the same server.
	ErrInvalid = errors.New("redlock: invalid argument")

	// ErrClosed is returned by operations on a Locker after Close.
	ErrClosed = errors.New("redlock: locker closed")

	// ErrMisconfigured means the nodes refuse the library's commands for a
	// reason no retry mends: a wrong user name or password, a missing ACL
	// permission, a command the server does not know. It is the reason of
	// a round in which nodes that answered so keep a majority out of reach
	// (a majority of them, with an odd number of nodes); Obtain and Do
	// then give up at once, whatever their context. It matches neither
	// ErrNoQuorum nor ErrNotObtained; the *QuorumError names each node's
	// own reply.
	ErrMisconfigured = errors.New("redlock: misconfigured: nodes refuse the library's commands")
)

// notHeldError is a reason for ErrLockNotHeld; it matches ErrLockNotHeld
// through errors.Is.
type notHeldError struct{ msg string }

func (e *notHeldError) Error() string { return e.msg }
func (e *notHeldError) Unwrap() error { return ErrLockNotHeld }

// ErrReleased means the Lock was released already (by Release or
// ReleaseAfter): a handle releases at most once, and is not extended or
// asked for its TTL after that; such calls fail with it without asking the
// servers. It matches ErrLockNotHeld.
var ErrReleased error = &notHeldError{"redlock: lock not held: released"}

// invalidNode reports whether a node's error says that the Locker's
// configuration is wrong: ErrInvalid, or a node that reached a server
// another node reaches too.
func invalidNode(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, conn.ErrSameServer)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Outcome is what one node did in a quorum round.
type Outcome int

const (
	// OutcomeNoReply means the node's reply was not waited for: the round
	// was decided before it answered. It may still apply the command (and
	// is cleaned up if so). A node that stayed silent until the node
	// timeout is OutcomeError instead, with an error matching
	// quorum.ErrTimeout.
	OutcomeNoReply Outcome = iota
	// OutcomeOK means the node granted, released, extended or reported our
	// lock.
	OutcomeOK
	// OutcomeHeldByOther means another owner holds the key on this node.
	OutcomeHeldByOther
	// OutcomeMissing means the key is not on this node.
	OutcomeMissing
	// OutcomeError means the call failed: a network error, a timeout, a
	// server error or a reply that made no sense.
	OutcomeError
)

// String names the outcome as error messages show it.
func (o Outcome) String() string {
	switch o {
	case OutcomeNoReply:
		return "not waited for"
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
	// Addr is the node's address, with any credentials removed.
	Addr string
	// Replica is true when the node said it is a replica (INFO
	// replication) when its connection last opened: it takes no writes,
	// so it votes no until promoted. The error's text names it as one.
	Replica bool
	// Outcome says what the node did.
	Outcome Outcome
	// TTL is the holder's remaining time when Outcome is OutcomeHeldByOther
	// (-1 when the key has no expiry), and our remaining time when a TTL query
	// returned OutcomeOK.
	TTL time.Duration
	// Err is the node's error when Outcome is OutcomeError. A node timeout
	// matches quorum.ErrTimeout, and also the error of the node's last
	// failed connection attempt when there was one (a refused dial, a DNS
	// lookup, a TLS handshake, a refused password).
	Err error
	// Metadata is the holder's metadata (WithMetadata) when Outcome is
	// OutcomeHeldByOther and it is known: Obtain asks the nodes held by
	// another for it, in one more round, when it gives up on contention
	// with its context still alive. TryObtain leaves it "": it is the
	// polling primitive, and would pay that round on every refusal (use
	// Inspect). "" otherwise.
	Metadata string
}

// QuorumError reports a quorum round that did not succeed, node by node. It
// matches (errors.Is) the sentinel that says why: ErrNotObtained,
// ErrNoQuorum, ErrLockExpired or ErrLockLost; ErrMisconfigured when nodes
// that refused the commands for good keep a majority out of reach; or
// ErrInvalid, whatever the round's outcome, when a node was refused because
// it reaches the same server as another node.
type QuorumError struct {
	// Op is the operation: "obtain", "release", "extend" or "ttl".
	Op string
	// Key is the lock key.
	Key string
	// Need is how many nodes had to agree.
	Need int
	// Nodes holds one result per node, in the order the clients were given;
	// it is empty when no node was asked (an Obtain that ended while it
	// waited in its Locker's line for the key).
	Nodes []NodeResult

	reason error
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
		return fmt.Sprintf("%s: %s: waited behind this Locker's own holder or waiters", e.reason, e.subject())
	}
	fmt.Fprintf(&b, "%s: %s: %d of %d nodes ok, %d needed", e.why(), e.subject(), ok, len(e.Nodes), e.Need)
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
	return e.Op + " " + quoteKey(e.Key)
}

// Unwrap returns the reason: ErrNotObtained, ErrNoQuorum, ErrLockExpired or
// ErrLockLost; ErrMisconfigured when nodes refused the commands for good
// (see ErrMisconfigured); or ErrInvalid when a node was refused for a
// mistake of the caller's (two nodes that reach the same server). No retry
// mends the last two.
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

// refusing counts the nodes whose error is a permanent refusal.
func (e *QuorumError) refusing() int {
	n := 0
	for _, r := range e.Nodes {
		if r.Outcome == OutcomeError && conn.Permanent(r.Err) {
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

// notTried is the error of an acquisition of key whose ctx has ended before
// it asked any node. It matches ctx.Err(), and neither ErrNotObtained nor
// ErrNoQuorum: nothing is known of the nodes.
func notTried(ctx context.Context, key string) error {
	return fmt.Errorf("%w: obtain %s: %w", errNotTried, quoteKey(key), ctx.Err())
}

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
