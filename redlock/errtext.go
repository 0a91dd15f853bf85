package redlock

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Error text: every message the library builds is one line (a log line or
// a CLI's stderr must not break in two, nor be forged by a key or a server
// reply that holds a newline), names a key by a bounded, quoted form, and
// says what actually went wrong on a node when that is known.

// nodeErrText is a node's error as QuorumError shows it: one line,
// without the library's prefix, with a refused password named first:
// go-redis's own text for it names only the command that met it (CLIENT
// INFO, the first one we send); and a replica named as one, with what to
// do.
// Refused dials, DNS lookups and TLS handshakes say what they are already.
func nodeErrText(err error) string {
	// Without the library's prefix, which the QuorumError's own text has
	// (a node's error may carry it: "redlock: same server twice: ...").
	msg := replyText(strings.ReplaceAll(conn.SingleLine(err.Error()), "redlock: ", ""))
	switch {
	case strings.Contains(msg, "NOAUTH"):
		return "authentication required (no password given for this node): " + msg
	case strings.Contains(msg, "WRONGPASS"):
		return "authentication failed (wrong user name or password): " + msg
	case strings.Contains(msg, "READONLY"):
		return "refused as a replica: " + msg
	case strings.Contains(msg, "DB index is out of range"):
		return "database index out of range (the URL's /DB or the client's DB; the server's databases setting is lower): " + msg
	}
	return msg
}

// The scripts' error replies start with a code (ABSTAIN, INVALID) that
// the library decodes; a user reads what follows, in words.
var (
	abstainReply = regexp.MustCompile(`ABSTAIN node lost its memory, abstains for (\d+) ms more`)
	sizeReply    = regexp.MustCompile(`\bSIZE (\d+)\b`)
	codeReply    = regexp.MustCompile(`\b(ABSTAIN|INVALID) `)
)

// replyText is msg with the scripts' reply codes said in words.
func replyText(msg string) string {
	msg = abstainReply.ReplaceAllStringFunc(msg, func(m string) string {
		ms, _ := strconv.ParseInt(abstainReply.FindStringSubmatch(m)[1], 10, 64)
		return fmt.Sprintf("node abstains for %v more: it lost its memory (flush, restart, reload, promotion or eviction)", time.Duration(ms)*time.Millisecond)
	})
	msg = sizeReply.ReplaceAllString(msg, "the semaphore has $1 permits on this node")
	return codeReply.ReplaceAllStringFunc(msg, func(m string) string {
		if strings.HasPrefix(m, "ABSTAIN") {
			return "node abstains: "
		}
		return ""
	})
}

// userKey is a key as messages name it: the user's own quoted; one of the
// library's own by what it is for (a semaphore's, a read-write lock's, a
// multi-key lock's), never by its name on the servers.
func userKey(key string) string {
	switch wire.KindOf(key) {
	case wire.Permit, wire.SemSizeKey:
		return "semaphore " + quoteKey(wire.Name(key))
	case wire.Lease:
		return "read lease of " + quoteKey(wire.Name(key))
	case wire.LeaseIndex, wire.WriterMark:
		return "read-write lock " + quoteKey(wire.Name(key))
	}
	switch {
	case strings.HasPrefix(key, wire.SemPrefix):
		// A semaphore's own name under the prefix: its line and wake-ups.
		return "semaphore " + quoteKey(key[len(wire.SemPrefix):])
	case strings.HasPrefix(key, ReservedPrefix):
		return "the lock's own key"
	}
	return quoteKey(key)
}

// holderText is a holder's metadata as a node result shows it: quoted and
// bounded like a key.
func holderText(meta string) string { return quoteKey(meta) }

// goneError is a reason for ErrLockExpired or ErrLockLost that says who
// removed the keys when it was not their TTL: a ForceRelease. It matches
// its base (and so ErrLockNotHeld).
type goneError struct {
	msg  string
	base error
}

func (e *goneError) Error() string { return e.msg }
func (e *goneError) Unwrap() error { return e.base }

// errGoneForced: a ForceRelease removed the keys after the lock was
// obtained, and nobody took them since; errLostForced: and another owner
// took them since. (This Lock's own Release needs no such reason: later
// calls fail with ErrReleased without asking the servers, and a call
// already queued reaches every node before the release does.)
var (
	errGoneForced error = &goneError{msg: "redlock: lock not held: force-released (ForceRelease or redlock release --force)", base: ErrLockExpired}
	errLostForced error = &goneError{msg: "redlock: lock lost: force-released (ForceRelease or redlock release --force), then taken by another owner", base: ErrLockLost}
)

// forcedGrace is how long a note of force.lua outlives the TTL that the
// hold it removed had left: a holder whose rounds are late (a paused
// process, a slow KeepAlive) is still told why its keys are gone.
const forcedGrace = time.Minute

// forceLog remembers the ForceRelease calls of a Locker, so that a Lock
// that finds its keys gone can say that they were removed rather than
// expired, without asking the nodes. A Lock keeps the log's count at its
// creation (born); a key force-released later carries a higher number.
// Another process's ForceRelease (the CLI's) is read from the notes it
// left on the nodes instead (see Lock.notHeld).
type forceLog struct {
	seq  atomic.Uint64
	mu   sync.Mutex
	keys map[string]uint64 // key → number of its latest ForceRelease
}

// maxForceLog bounds the keys a forceLog remembers.
const maxForceLog = 1024

// born is the number a Lock created now keeps.
func (f *forceLog) born() uint64 { return f.seq.Load() }

// note records a ForceRelease of key, before it is sent.
func (f *forceLog) note(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil || len(f.keys) >= maxForceLog {
		// Bounded: a Locker that force-releases many keys forgets the
		// older ones, whose losses then read as expiries again.
		f.keys = make(map[string]uint64)
	}
	f.keys[key] = f.seq.Add(1)
}

// since reports whether one of keys was force-released after born.
func (f *forceLog) since(keys []string, born uint64) bool {
	if f.seq.Load() == born {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		// A reader's lease is removed with its read-write lock's index.
		if f.keys[k] > born || (wire.KindOf(k) == wire.Lease && f.keys[wire.IndexOfLease(k)] > born) {
			return true
		}
	}
	return false
}

// notHeld is the error of k's failed release, extend or TTL round, as the
// Locker's notHeld tells it, except that keys that a ForceRelease removed
// are said to be force-released: known at once when it went through the
// same Locker, else from the notes force.lua leaves, which it reads on the
// nodes that found k's keys gone or another's (one more round, within the
// node timeout; skipped when ctx has ended or the Locker is closed, and
// the note is gone a minute after the hold's TTL would have ended). The
// caller holds no guard of the Locker's; notHeldGuarded is for one that
// does.
func (k *Lock) notHeld(ctx context.Context, op string, res *quorum.Result[int64]) *QuorumError {
	release, err := k.locker.guard()
	if err != nil {
		// Closed: no round, the reason as the nodes gave it.
		return k.notHeldGuarded(endedCtx, op, res)
	}
	defer release()
	return k.notHeldGuarded(ctx, op, res)
}

// endedCtx is a context that has ended: notHeldGuarded makes no round
// with it.
var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// notHeldGuarded is notHeld for a caller that holds the Locker's guard.
func (k *Lock) notHeldGuarded(ctx context.Context, op string, res *quorum.Result[int64]) *QuorumError {
	e := k.locker.notHeld(op, k.key, res)
	switch {
	case e.reason == ErrLockExpired && k.locker.forced.since(k.keys, k.forceBorn):
		e.reason = errGoneForced
	case e.reason != ErrLockExpired && e.reason != ErrLockLost:
	case k.forcedOnNodes(ctx, res):
		if e.reason == ErrLockExpired {
			e.reason = errGoneForced
		} else {
			e.reason = errLostForced
		}
	}
	return e
}

// forcedOnNodes reports whether a node that said k's keys are not k's in
// res holds a note of force.lua that names k's hold: a ForceRelease, from
// any process, removed it there. It asks only those nodes, each within
// the node timeout; none when ctx has ended. The caller holds the
// Locker's guard.
func (k *Lock) forcedOnNodes(ctx context.Context, res *quorum.Result[int64]) bool {
	l := k.locker
	if ctx.Err() != nil {
		return false
	}
	notes := make([]string, len(k.keys))
	for i, key := range k.keys {
		notes[i] = l.cfg.layout.ForcedKey(key)
	}
	forced := scriptCall{script: scripts.Forced, keys: notes, args: []any{k.holder.Prefix, k.holder.Hold}}
	refused := func(i int) bool { return i < len(res.Replies) && res.Replies[i].Vote == quorum.No }
	var found atomic.Bool
	l.askNodes(ctx, k.cfg.nodeTimeout, forced, refused, func(_ int, got *redis.Cmd) {
		if v, err := got.Int64(); err == nil && v == 1 {
			found.Store(true)
		}
	})
	return found.Load()
}

// withHolders adds the holder's metadata to the nodes held by another in
// err, the error of an Obtain that gives up on contention, and returns err.
// The acquire script's refusal carries only the holder's PTTL (an integer
// reply keeps the hot path cheap), so this costs one more round, to the
// nodes that refused alone; it is made once per call that gives up, never
// per attempt, and not when ctx has ended (the caller's deadline has
// passed: it gets its error now). A node that does not answer in time is
// left without metadata.
func (l *Locker) withHolders(ctx context.Context, key string, err error) error {
	// The round's error is left as it is (it may have been handed to an
	// Observer already): the metadata goes into a copy.
	qe, ok := err.(*QuorumError)
	if !ok || ctx.Err() != nil || qe.reason != ErrNotObtained || qe.Key != key || len(qe.Nodes) != len(l.nodes) {
		return err
	}
	release, gerr := l.guard()
	if gerr != nil {
		return err
	}
	defer release()
	inspect := scriptCall{script: scripts.Inspect, keys: []string{key, l.cfg.layout.FenceKey(key)}}
	heldByOther := func(i int) bool { return qe.Nodes[i].Outcome == OutcomeHeldByOther }
	meta := make([]string, len(l.nodes))
	var mu sync.Mutex
	l.askNodes(ctx, l.cfg.nodeTimeout, inspect, heldByOther, func(i int, got *redis.Cmd) {
		ns, _ := inspectReply("", got)
		mu.Lock()
		meta[i] = ns.Metadata
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	named := *qe
	named.Nodes = slices.Clone(qe.Nodes)
	for i := range named.Nodes {
		if named.Nodes[i].Outcome == OutcomeHeldByOther {
			named.Nodes[i].Metadata = meta[i]
		}
	}
	return &named
}
