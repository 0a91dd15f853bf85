package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/scripts"

	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/quorum"
)

// acquirePlan is what one acquisition sends: a fresh token (or the
// caller's), the hold id of the Lock it may become, and the acquire
// script's keys and arguments.
type acquirePlan struct {
	token    string
	holder   holder
	keys     []string // the acquire script's KEYS
	lockKeys []string // the lock key alone: what a release names
	args     []any
}

func newPlan(key string, cfg *config) acquirePlan {
	token, hold := cfg.token, "1"
	if token == "" {
		// A fresh token per attempt: a straggler's clean-up from a failed
		// attempt can then never delete the key of a later one, and the
		// token alone tells this attempt's hold apart.
		token = uuid.NewString()
	} else {
		// The caller's token may hold the key already, for another Lock:
		// this attempt's hold needs an id of its own.
		hold = newHoldID()
	}
	// The value starts with the prefix: one string for both.
	value := token + "\x00" + hold + "\x00" + cfg.metadata
	h := holder{prefix: value[:len(token)+1], hold: hold}
	if !cfg.fencing && cfg.guard <= 0 {
		// The usual case, in one allocation.
		b := new(planArgs)
		b.keys[0] = key
		b.args = [3]any{value, serverMillis(cfg.serverTTL()), h.prefix}
		return acquirePlan{token: token, holder: h, keys: b.keys[:], lockKeys: b.keys[:], args: b.args[:]}
	}
	keys := []string{key, fenceKey(key), guardMarker, guardQuarantine}
	fenced := "0"
	if cfg.fencing {
		fenced = "1"
	}
	args := []any{value, serverMillis(cfg.serverTTL()), h.prefix, fenced, serverMillis(cfg.guard), serverMillis(cfg.fenceLifetime())}
	return acquirePlan{token: token, holder: h, keys: keys, lockKeys: keys[:1], args: args}
}

// planArgs backs the keys and arguments of a plan without fencing or guard.
// A lock obtained with the plan keeps it (its key slice), about 100 bytes
// more per held lock than a slice of its own: one allocation less on every
// attempt.
type planArgs struct {
	keys [1]string
	args [3]any
}

// attempt is one quorum round of the acquire script, plus, with fencing,
// one round that writes the fence back when the granting nodes disagree on
// it (see writeBackFence).
//
// An ended ctx obtains nothing: attempt then asks no node. The node calls do
// not watch ctx (each runs on its own deadline, so that a round's undo and
// its stragglers' clean-up always reach the nodes), so a round started after
// ctx ended would still take the lock. A ctx that ends during the round does
// not undo it: a lock that a majority granted with validity left is
// returned, as a successful acquisition that raced the cancellation (the
// caller holds a lock it can release; undoing it would cost a round and
// gain nothing).
func (l *Locker) attempt(ctx context.Context, key string, cfg *config) (*Lock, error) {
	if ctx.Err() != nil {
		return nil, notTried(ctx, key)
	}
	release, err := l.guard()
	if err != nil {
		return nil, err
	}
	defer release()

	p := newPlan(key, cfg)
	late := l.settler(&p, cfg.nodeTimeout)
	var validity time.Duration
	start := cfg.clock.Now()
	res := runRound(ctx, l, round[int64]{
		timeout: cfg.nodeTimeout,
		// A refusal still to come may tell contention from outage.
		classify: true,
		start:    l.observeNodes(scripts.Acquire, key, l.sender(cfg.nodeTimeout, scripts.Acquire.Guarded(cfg.guard > 0), p.keys, p.args, decodeAcquire, nil)),
		// Validity is taken when the majority is in: that is the moment
		// the lock is granted, and the TTL has been running since the
		// first request reached a server.
		accept: func(*quorum.Result[int64]) bool {
			validity = clock.Validity(cfg.ttl, cfg.clock.Since(start), cfg.driftFactor)
			return validity > 0
		},
		// A node that answers after the decision may have set the key (or
		// may have, if its reply was lost): see settle.
		late: func(r quorum.Reply[int64], _ bool) { late.arrived(r) },
	})
	return l.conclude(ctx, key, cfg, &p, &res, start, validity, late, "")
}

// mustUndo says whether a failed attempt must release a node that voted v:
// one that granted, and one whose reply was an error, since the SET may
// have been applied with its reply lost. The undo takes away the attempt's
// own hold only (its hold id), so it never touches an earlier hold of the
// same token.
func mustUndo(v quorum.Vote) bool {
	return v == quorum.Yes || v == quorum.Failed
}

// conclude turns the round of an acquisition (an attempt's or a handoff's)
// into a Lock, after writing the fence back if fencing is on; or, when it
// failed, undoes the acquisition wherever it may have been applied,
// announcing the undo on channel unless it is "", and says why it failed.
// The caller holds the guard, or a count on l.bg that keeps the node pipes
// open (a handoff's take-over after Close).
func (l *Locker) conclude(ctx context.Context, key string, cfg *config, p *acquirePlan, res *quorum.Result[int64],
	start time.Time, validity time.Duration, late *settle, channel string) (*Lock, error) {
	var (
		fence  uint64
		reason error
	)
	var rest *fenceWrite // the fence write-back that stragglers may need
	if res.OK && cfg.fencing {
		fence, validity, rest, reason = l.writeBackFence(ctx, key, p.holder, cfg, res, start)
	}
	if res.OK && reason == nil && misconfigured(res) {
		// A node was refused because it reaches another node's server:
		// say so now rather than hand out locks from a miscounted cluster
		// (the grant itself counted distinct servers only).
		reason = ErrInvalid
	}
	// A lock leaves here only while it is valid. The round may be concluded
	// well after its majority came in (a handoff's result waits for its
	// owner to take it over; the clock may jump): a lock whose Until has
	// passed would have its holder work past its validity. It fails as a
	// majority that came too late does (ErrNoQuorum), and is undone.
	if res.OK && reason == nil && cfg.clock.Now().Before(start.Add(validity)) {
		late.succeed(rest)
		return &Lock{
			locker: l,
			key:    key,
			keys:   p.lockKeys,
			token:  p.token,
			holder: p.holder,
			meta:   cfg.metadata,
			fence:  fence,
			cfg:    *cfg,
			until:  start.Add(validity),
			since:  cfg.obs.now(),
			// A ForceRelease after this explains a loss (see forceLog).
			forceBorn: l.forced.born(),
		}, nil
	}

	// Failed: release on every node that granted or may have applied the
	// SET before its reply was lost, and on those that answer later.
	pending := late.fail()
	l.undoAll(ctx, cfg.nodeTimeout, p.lockKeys, p.holder, channel, func(i int) bool {
		return mustUndo(res.Replies[i].Vote) || slices.Contains(pending, i)
	})
	// Why, from the nodes' answers alone: a context that ended meanwhile
	// says nothing about the nodes, and an outage reported as contention
	// would tell a caller (a cron job's redlock run, say) that all is well.
	switch {
	case reason != nil:
	case res.No > len(l.nodes)-l.need:
		// Nodes held by another owner make a majority impossible, even
		// had every other node granted.
		reason = ErrNotObtained
	default:
		// Nodes that failed or did not answer in time (with or without
		// some held by another), or a majority that came too late to
		// leave any validity: an outage, not contention.
		reason = ErrNoQuorum
	}
	return nil, withContext(ctx, l.roundError("obtain", key, res, acquireOutcome, reason))
}

// writeBackFence takes the highest fence among the granting nodes and
// makes sure a majority of nodes count at least that far before the lock is
// handed out: when a majority of the granting nodes answered that very
// fence, they already do, and nothing waits; otherwise it raises every
// node's counter to the fence in a second round. Either way every other
// node that has not counted exactly the fence gets it too (in the first
// case only once it has answered, if it had not yet: see settle), a node
// where our token holds the key exactly the fence, so that a re-entry
// reads it back there (see fence.lua). The returned fenceWrite is what
// stragglers still need; nil when none does.
//
// Why fences grow strictly across successive holders of a key: a majority
// W of nodes count at least our fence f before the lock is handed out,
// either because they answered f (their counter after the grant) or because
// they took the write-back. A later holder needs a majority too, which
// shares at least one node with W. It can only be granted there once our
// key is gone, that is after our Release or expiry, both after W counted
// to f; its grant there raises the counter past f, and its fence, a
// maximum, is larger still. Nodes agree on f when they granted the same
// holders of the key within one 100 ms window of the clock floor (see
// acquire.lua), the usual case, which is why one round trip usually does.
// This needs nodes that keep their counters. Where a node lost its counter
// (it expired, or the node lost its memory, or a reload brought back an
// older one) the counter starts again from the server's clock, which is
// above our fence as long as that clock is not behind it by the counter's
// lifetime, or, under the restart guard, by the guard's maximum TTL: the
// time the node abstained since it last saw our fence (see acquire.lua).
func (l *Locker) writeBackFence(ctx context.Context, key string, h holder, cfg *config, acq *quorum.Result[int64],
	start time.Time) (uint64, time.Duration, *fenceWrite, error) {
	var fence int64
	for _, r := range acq.Replies {
		if r.Vote == quorum.Yes {
			fence = max(fence, r.Value)
		}
	}
	agree := 0
	for _, r := range acq.Replies {
		if answered(r, fence) {
			agree++
		}
	}
	fw := &fenceWrite{key: key, holder: h, fence: fence, lifetimeMs: serverMillis(cfg.fenceLifetime())}
	if agree >= l.need && !cfg.confirmFence {
		// The rest get the fence in the background (it helps a node that
		// later rejoins a majority, and gives a node that grants after the
		// decision the fence exactly); the guarantee does not wait for it.
		// A node that had not answered yet gets it only if its answer
		// differs (see settle): usually it grants the same fence, and the
		// write would change nothing. Usually nothing is sent at all, and
		// the script call is never built.
		for _, r := range acq.Replies {
			if r.Vote != quorum.Pending && !answered(r, fence) {
				fw.sendTo(l, r.Node, cfg.nodeTimeout) // the caller holds the guard, or a count on l.bg
			}
		}
		return uint64(fence), clock.Validity(cfg.ttl, cfg.clock.Since(start), cfg.driftFactor), fw, nil
	}
	keys, _, cmd := fw.call(callNonce(cfg.nodeTimeout))
	res := runRound(ctx, l, round[int64]{
		timeout: cfg.nodeTimeout,
		// Every node gets the fence (it costs nothing more and helps a node
		// that later rejoins a majority); only granting nodes count.
		start: func(ctx context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
			decode := decodeBestEffort
			if acq.Replies[i].Vote == quorum.Yes {
				decode = decodeDone
			}
			(&scriptCall{timeout: cfg.nodeTimeout, script: scripts.Fence, keys: keys, cmd: cmd, decode: decode}).send(&l.nodes[i], i, reply, l.sendsInline())
		},
	})
	validity := clock.Validity(cfg.ttl, cfg.clock.Since(start), cfg.driftFactor)
	if !res.OK || validity <= 0 {
		return 0, 0, nil, ErrNoQuorum
	}
	// Every node, stragglers included, had the fence queued behind its
	// acquisition: nothing is left for them.
	return uint64(fence), validity, nil, nil
}

// answered reports whether r granted with counter fence: that node counts
// the fence already, and a write-back there would change nothing.
func answered(r quorum.Reply[int64], fence int64) bool {
	return r.Vote == quorum.Yes && r.Value == fence
}

// misconfigured reports whether a node of the round was refused for a
// mistake of the caller's (it reaches another node's server).
func misconfigured(res *quorum.Result[int64]) bool {
	for _, r := range res.Replies {
		if r.Err != nil && invalidNode(r.Err) {
			return true
		}
	}
	return false
}
