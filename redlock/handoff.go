package redlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// Handoff: when a Lock is released while another goroutine of the same
// Locker waits for its key, the release and that goroutine's acquisition go
// to each node as one script (handoff.lua: release.lua, then acquire.lua,
// atomically), so the waiter holds the lock one round trip after the release
// began, instead of after the release, a wake-up and its own round trip.
//
// Safety is that of a release followed by an acquisition: on each node the
// key passes from the old token to the new one with nothing in between; the
// new owner needs a majority of such nodes, within a validity counted from
// the moment the round began, exactly as an attempt of its own would.
//
// Only the head of a key's line (gates) takes handoffs, and only while it
// sleeps between attempts: it posts an offer, which a Release claims. The
// releaser runs the round and hands the result over; the head finishes the
// acquisition (writes the fence back, or undoes a failed one) itself.
//
// While a goroutine holds a lock it got from the line, the next head asks
// the nodes nothing (they would refuse): it posts its offer at once and
// sleeps until a handoff, a poke (a release without handoff, or Close), or
// the end of that lock's validity (gates.hold, heldFor, released).
//
// A Locker hands a key over at most maxHandoffs times in a row; then a
// Release lets go of the key on the nodes and announces it, and the local
// head learns of it as waiters in other processes do, so they get their
// chance too.
const maxHandoffs = 8

// acquireVote is the acquisition's share of a handoff reply.
func acquireVote(r quorum.Reply[handoffReply]) quorum.Reply[int64] {
	out := quorum.Reply[int64]{Node: r.Node, Vote: r.Vote, Err: r.Err}
	switch {
	case r.Vote == quorum.Pending || r.Err != nil:
	case r.Value.acqErr != nil:
		out.Vote, out.Err = quorum.Failed, r.Value.acqErr
	default:
		out.Vote, out.Value, out.Err = decodeAcquire(r.Value.acquire, nil)
	}
	return out
}

// releaseVote is the release's share of a handoff reply.
func releaseVote(r quorum.Reply[handoffReply]) quorum.Reply[int64] {
	out := quorum.Reply[int64]{Node: r.Node, Vote: r.Vote, Err: r.Err}
	if r.Vote != quorum.Pending && r.Err == nil {
		out.Vote, out.Value, out.Err = decodeCompare(r.Value.release, nil)
	}
	return out
}

// split is one side of a handoff round, as a round of its own.
func split(res *quorum.Result[handoffReply], side func(quorum.Reply[handoffReply]) quorum.Reply[int64]) quorum.Result[int64] {
	out := quorum.Result[int64]{Replies: make([]quorum.Reply[int64], len(res.Replies))}
	for _, r := range res.Replies {
		out.Add(side(r))
	}
	return out
}

// releaseRound is the release's round: a handoff to the head of this
// Locker's line for the key, if its kind has handoffs and one waits, or a
// release on every node. It fails only with ErrClosed.
func (k *Lock) releaseRound(ctx context.Context, cooldownMs int64) (quorum.Result[int64], error) {
	var started func()
	line := k.kind.line(k.keys)
	if cooldownMs == 0 && k.kind.handoff {
		o, fair := k.locker.gates.claimOffer(line)
		if o != nil {
			return k.handoff(ctx, o)
		}
		if !fair {
			// Wake this Locker's own waiter for the key as soon as the
			// release is queued on every node, instead of when a node's
			// notification comes back: its acquisition queues behind the
			// release on each node's per-key queue, so it cannot run
			// before it.
			started = func() { k.locker.notify.Wake(k.key) }
		}
	}
	// Without a handoff, the head of this Locker's line for the key, if it
	// waits, tries at once when we are done (a fair release: as waiters
	// elsewhere hear of it).
	defer k.locker.gates.released(line)
	timeout := k.cfg.nodeTimeout
	c := k.kind.release(k.keys, k.holder, true, cooldownMs)
	return k.locker.call(ctx, round[int64]{
		timeout: timeout,
		linger:  k.releaseLinger(),
		start:   k.locker.observeNodes(OpRelease, k.key, k.locker.sender(timeout, c, decodeCompare, started)),
	})
}

// handoff releases the lock and, in the same round, acquires it for the
// offer's owner; it returns the release's share of the round, as a round of
// its own (OK when a majority released), and sends the acquisition's to the
// offer. It fails only with ErrClosed.
func (k *Lock) handoff(ctx context.Context, o *offer) (quorum.Result[int64], error) {
	l := k.locker
	release, err := l.guard()
	if err != nil {
		o.done <- handoffResult{closed: true}
		return quorum.Result[int64]{}, err
	}
	defer release()
	cfg, p := &o.a.cfg, &o.plan
	timeout := k.cfg.nodeTimeout
	if cfg.fencing {
		// The offer's plan may be old by now; the counters' start is not.
		_, p.args[acquireStartArg] = fenceStart(cfg)
	}
	args := handoffArgs(k.holder, releaseChannel(k.key), p.args)
	script := scripts.Handoff.Guarded(cfg.guard > 0)
	cmd := conn.EvalSha(script, p.keys, args)

	// Replies after the decision, for the release's outcome when the
	// decision left it open; each node sends at most one.
	stray := make(chan quorum.Reply[handoffReply], len(l.nodes))
	g := granting{late: l.settler(o.a.kind, p, timeout), start: cfg.clock.Now()}
	began := time.Now()
	res := runRound(ctx, l, round[handoffReply]{
		timeout: timeout,
		start: func(nctx context.Context, i int, reply func(int, quorum.Vote, handoffReply, error)) {
			l.nodes[i].sendRaw(timeout, script, p.keys, cmd, func(c *redis.Cmd) {
				v, r, err := decodeHandoff(c)
				// The node's call's context, as observeNodes reports.
				l.handoffNode(nctx, k.key, began, quorum.Reply[handoffReply]{Node: i, Vote: v, Value: r, Err: err})
				reply(i, v, r, err)
			})
		},
		accept: func(*quorum.Result[handoffReply]) bool {
			g.validity = clock.Validity(cfg.ttl, cfg.clock.Since(g.start), cfg.driftFactor)
			return g.validity > 0
		},
		// As in an attempt: nodes that answer late are settled with the
		// acquisition (see settle).
		late: func(r quorum.Reply[handoffReply], _ bool) {
			g.late.arrived(acquireVote(r))
			stray <- r
		},
	})
	g.res = split(&res, acquireVote)
	g.res.OK = res.OK
	// The offer's owner concludes the acquisition (writes the fence back,
	// or undoes it) in takeOver, perhaps after Close. This count on bg,
	// taken while we hold the guard and ended by takeOver, keeps Close from
	// closing the node pipes before it has: an undo must still run.
	l.bg.Add(1)
	o.done <- handoffResult{granting: g}

	return l.releaseOutcome(&res, stray, timeout-time.Since(began)), nil
}

// releaseOutcome is the release's share of a handoff's round res, as a
// round of its own (OK when a majority released). The round decided on
// both steps together; if that left the release open (it was refused on
// some nodes and others are still to answer), it waits for their late
// replies on stray, for up to left.
func (l *Locker) releaseOutcome(res *quorum.Result[handoffReply], stray <-chan quorum.Reply[handoffReply], left time.Duration) quorum.Result[int64] {
	rel := split(res, releaseVote)
	if rel.Yes < l.need && rel.Yes+rel.Pending() >= l.need {
		t := time.NewTimer(left)
		defer t.Stop()
	wait:
		for rel.Yes < l.need && rel.Yes+rel.Pending() >= l.need {
			select {
			case r := <-stray:
				if rel.Replies[r.Node].Vote == quorum.Pending {
					rel.Add(releaseVote(r))
				}
			case <-t.C:
				break wait
			}
		}
	}
	rel.OK = rel.Yes >= l.need
	return rel
}

// takeOver finishes the acquisition of a handoff, as attempt does its own:
// the lock, or, if the handoff failed, the undo of its writes (announced,
// since the old owner's key is gone too) and the reason.
//
// After Close it still undoes what the round granted, and returns ErrClosed:
// the keys would otherwise stay until their TTL, and nobody would hear that
// the old owner let go.
func (o *offer) takeOver(ctx context.Context, hr handoffResult) (*Lock, error) {
	if hr.closed {
		return nil, ErrClosed
	}
	l := o.a.l
	defer l.bg.Done() // taken by handoff for us
	release, err := l.guard()
	if err != nil {
		hr.res.OK = false
		_, _ = o.a.conclude(ctx, &o.plan, &hr.granting, true)
		return nil, err
	}
	defer release()
	return o.a.conclude(ctx, &o.plan, &hr.granting, true)
}
