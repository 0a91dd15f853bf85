package redlock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
)

// granting is an acquire round (an attempt's or a handoff's) until it is
// concluded: its votes, when it began, the validity it left when the
// majority came in, and its stragglers' settle.
type granting struct {
	res      quorum.Result[int64]
	start    time.Time
	validity time.Duration
	late     *settle
	// reason, if set, fails the round whatever its votes (set by chooseSlot).
	reason error
	// granted is how many nodes granted within the round (a slot round's
	// grants of any slot).
	granted int
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
func (a *acquisition) attempt(ctx context.Context) (*Lock, error) {
	defer a.tr.attempted(a.tr.now())
	if ctx.Err() != nil {
		return nil, notTried(ctx, a.name)
	}
	l, cfg := a.l, &a.cfg
	release, err := l.guard()
	if err != nil {
		return nil, err
	}
	defer release()

	p := a.kind.plan(a.keys, cfg)
	g := granting{late: l.settler(a.kind, &p, cfg.nodeTimeout), start: cfg.clock.Now()}
	g.late.lateGrant = a.lateGrant
	rd := round[int64]{
		timeout: cfg.nodeTimeout,
		// A refusal still to come may tell contention from outage.
		classify: true,
		start:    l.observeNodes(OpObtain, a.name, l.sender(cfg.nodeTimeout, scriptCall{script: a.kind.acquire.Guarded(cfg.guard > 0), keys: p.keys, args: p.args, queue: p.queue, shedding: &g.late.acquires}, decodeAcquire, nil)),
		// Validity is taken when the majority is in: that is the moment
		// the lock is granted, and the TTL has been running since the
		// first request reached a server.
		accept: func(*quorum.Result[int64]) bool {
			g.validity = clock.Validity(cfg.ttl, cfg.clock.Since(g.start), cfg.driftFactor)
			return g.validity > 0
		},
		// A node that answers after the decision may have set the key (or
		// may have, if its reply was lost): see settle.
		late: func(r quorum.Reply[int64], _ bool) { g.late.arrived(r) },
	}
	if a.kind.chooseSlot != nil {
		// Grants of different slots, and a node that may say the
		// semaphore has another size: every answer counts (decideSlot).
		rd.waitAll = true
	}
	g.res = runRound(ctx, l, rd)
	g.granted = g.res.Yes
	if a.kind.chooseSlot != nil {
		a.kind.chooseSlot(a, &p, &g)
	}
	return a.conclude(ctx, &p, &g, false)
}

// try is TryObtain's one attempt: attempt's outcome, with ctx's error
// joined to a failure when ctx has ended.
func (a *acquisition) try(ctx context.Context) (*Lock, error) {
	lock, err := a.attempt(ctx)
	if err != nil && ctx.Err() != nil {
		err = withContext(ctx, err)
	}
	return lock, err
}

// mustUndo says whether a failed attempt must release the node that gave
// reply r: one that granted, and one whose reply was an error, since the
// SET may have been applied with its reply lost; not one whose call was
// never sent (conn.ErrShed), which took nothing. The undo takes away the
// attempt's own hold only (its hold id), so it never touches an earlier
// hold of the same token.
func mustUndo(r quorum.Reply[int64]) bool {
	return (r.Vote == quorum.Yes || r.Vote == quorum.Failed) && !errors.Is(r.Err, conn.ErrShed)
}

// conclude turns the round of an acquisition of plan p (an attempt's or a
// handoff's) into a Lock, after writing the fence back if fencing is on;
// or, when it failed, undoes the acquisition wherever it may have been
// applied, announcing the undo if announce is set, and says why it failed.
// The caller holds the guard, or a count on l.bg that keeps the node pipes
// open (a handoff's take-over after Close).
func (a *acquisition) conclude(ctx context.Context, p *acquirePlan, g *granting, announce bool) (*Lock, error) {
	l, cfg := a.l, &a.cfg
	var (
		fence    uint64
		reason   = g.reason
		validity = g.validity
		rest     *fenceWrite // the fence write-back that stragglers may need
	)
	if g.res.OK && misconfigured(&g.res) {
		// A node was refused because it reaches another node's server:
		// say so now rather than hand out locks from a miscounted cluster
		// (the grant itself counted distinct servers only).
		reason = ErrInvalid
	}
	if g.res.OK && reason == nil && cfg.fencing {
		fence, validity, rest, reason = a.writeBackFence(ctx, p, g)
	}
	// A lock leaves here only while it is valid. The round may be concluded
	// well after its majority came in (a handoff's result waits for its
	// owner to take it over; the clock may jump): a lock whose Until has
	// passed would have its holder work past its validity. It fails as a
	// majority that came too late does (ErrNoQuorum), and is undone.
	if g.res.OK && reason == nil && cfg.clock.Now().Before(g.start.Add(validity)) {
		g.late.succeed(rest)
		return a.newLock(p, fence, g.start.Add(validity)), nil
	}

	// Failed: release on every node that granted or may have applied the
	// SET before its reply was lost, and on those that answer later.
	pending := g.late.fail()
	undo := a.kind.undo(p.lockKeys, p.holder, announce)
	undo.shedding = &g.late.undos
	l.undoAll(ctx, cfg.nodeTimeout, undo, func(i int) bool {
		return mustUndo(g.res.Replies[i]) || slices.Contains(pending, i)
	})
	// Why, from the nodes' answers alone: a context that ended meanwhile
	// says nothing about the nodes, and an outage reported as contention
	// would tell a caller (a cron job's redlock run, say) that all is well.
	switch {
	case reason != nil:
	case g.res.No > len(l.nodes)-l.need:
		// Nodes held by another owner make a majority impossible, even
		// had every other node granted.
		reason = ErrNotObtained
	default:
		// Nodes that failed or did not answer in time (with or without
		// some held by another), or a majority that came too late to
		// leave any validity: an outage, not contention.
		reason = ErrNoQuorum
	}
	qe := l.roundError("obtain", a.name, &g.res, acquireOutcome, reason)
	qe.split = g.granted > 0
	return nil, qe
}

// newLock is the Lock that an acquisition of plan p hands out, with its
// fence and valid until until.
func (a *acquisition) newLock(p *acquirePlan, fence uint64, until time.Time) *Lock {
	cfg := &a.cfg
	kind, key := a.kind, a.name
	if kind.heldAs != nil {
		kind, key = kind.heldAs, p.lockKeys[0]
	}
	return &Lock{
		locker: a.l,
		kind:   kind,
		key:    key,
		keys:   p.lockKeys,
		token:  p.token,
		holder: p.holder,
		meta:   cfg.metadata,
		fence:  fence,
		cfg:    *cfg,
		until:  until,
		since:  cfg.obs.now(),
		// A ForceRelease after this explains a loss (see forceLog).
		forceBorn: a.l.forced.born(),
	}
}

// writeBackFence takes the highest fence among the granting nodes of g
// and makes sure a majority of nodes count at least that far before the
// lock is handed out: when a majority of the granting nodes answered that
// very fence, they already do, and nothing waits; otherwise it raises every
// node's counter to the fence in a second round. Either way every other
// node that has not counted exactly the fence gets it too (in the first
// case only once it has answered, if it had not yet: see settle), a node
// where our token holds the key exactly the fence, so that a re-entry
// reads it back there (see fence.lua). It returns the fence, the validity
// left, and the fenceWrite that stragglers still need (nil when none does).
//
// Why fences grow strictly across successive holders of a key: a majority
// W of nodes count at least our fence f before the lock is handed out,
// either because they answered f (their counter after the grant) or because
// they took the write-back. A later holder needs a majority too, which
// shares at least one node with W. It can only be granted there once our
// key is gone, that is after our Release or expiry, both after W counted
// to f; its grant there raises the counter past f, and its fence, a
// maximum, is larger still. Nodes agree on f when they granted the same
// holders of the key and took the start the client offered (fenceStart),
// or granted within one 100 ms window of the clock (see
// acquire.lua), the usual case, which is why one round trip usually does.
// This needs nodes that keep their counters. Where a node lost its counter
// (it expired, or the node lost its memory, or a reload brought back an
// older one) the counter starts again from the server's clock, which is
// above our fence as long as that clock is not behind it by the counter's
// lifetime, or, under the restart guard, by the guard's maximum TTL: the
// time the node abstained since it last saw our fence (see acquire.lua).
func (a *acquisition) writeBackFence(ctx context.Context, p *acquirePlan, g *granting) (uint64, time.Duration, *fenceWrite, error) {
	l, cfg, acq := a.l, &a.cfg, &g.res
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
	fw := &fenceWrite{key: p.lockKeys[0], counter: cfg.layout.CounterOf(p.lockKeys[0]), holder: p.holder, fence: fence, lifetimeMs: serverMillis(cfg.fenceLifetime()), queue: p.queueKey()}
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
				l.sendOn(r.Node, cfg.nodeTimeout, fw.call("", 0)) // the caller holds the guard, or a count on l.bg
			}
		}
		return uint64(fence), clock.Validity(cfg.ttl, cfg.clock.Since(g.start), cfg.driftFactor), fw, nil
	}
	c := fw.call(callNonce(fw.key, cfg.nodeTimeout))
	cmd := conn.EvalSha(c.script, c.keys, c.args)
	res := runRound(ctx, l, round[int64]{
		timeout: cfg.nodeTimeout,
		// Every node gets the fence (it costs nothing more and helps a node
		// that later rejoins a majority); only granting nodes count.
		start: func(ctx context.Context, i int, reply func(int, quorum.Vote, int64, error)) {
			decode := decodeBestEffort
			if acq.Replies[i].Vote == quorum.Yes {
				decode = decodeDone
			}
			nc := nodeCall{timeout: cfg.nodeTimeout, script: c.script, keys: c.keys, queue: c.queue, cmd: cmd, decode: decode}
			nc.send(&l.nodes[i], i, reply, l.sendsInline())
		},
	})
	validity := clock.Validity(cfg.ttl, cfg.clock.Since(g.start), cfg.driftFactor)
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
