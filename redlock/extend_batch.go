package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// The characters of extend_many.lua's reply, one per key.
const (
	manyOurs  = '1' // extended (replyOurs)
	manyGone  = '0' // the key is gone (replyGone)
	manyOther = '-' // another token holds it (replyOther)
)

// manyCode maps a character of extend_many.lua's reply to the reply of
// extend.lua, for decodeCompare.
func manyCode(c byte) int64 {
	switch c {
	case manyOurs:
		return replyOurs
	case manyGone:
		return replyGone
	case manyOther:
		return replyOther
	}
	return int64(c) // decodeCompare refuses it
}

// extendMany extends locks, single-key locks that share their TTL, node
// timeout, drift factor, lock-delay and clock (see extendGroup), in one
// round: one extend_many.lua call per node for all of them. It does for
// each lock what Extend(ctx, ttl) does, and returns each one's error in
// order: per key, a majority of nodes must say it was ours within the
// validity, which counts from the round's start to the answer that
// completed that key's majority; a lock that the nodes say
// is not ours is marked lost; any other failure is an outage (ErrNoQuorum),
// for its keeper to retry. bt, nil without an observer, reports each
// lock's extension as an Extend would, node answers included.
func (l *Locker) extendMany(locks []*Lock, bt *batchTrace) []error {
	errs := make([]error, len(locks))
	cfg := locks[0].cfg
	b := gatherExtendable(locks, errs, &cfg)
	if len(b.keys) == 0 {
		return errs
	}
	release, err := l.guard()
	if err != nil {
		for _, i := range b.which {
			errs[i] = err
		}
		return errs
	}
	defer release()
	res, start := l.extendManyRound(&b, &cfg, bt)
	l.settleExtended(locks, &b, &res, &cfg, start, errs)
	return errs
}

// manyBatch is what one extend_many.lua call carries: the keys of the
// locks still to extend, their arguments (the TTL first, then each key's
// holder), and for each key the index of its lock in the caller's list.
type manyBatch struct {
	keys  []string
	args  []any
	which []int
}

// gatherExtendable returns the batch of the locks that may still be
// extended; each of the others (released, or already lost) gets its error
// in errs.
func gatherExtendable(locks []*Lock, errs []error, cfg *config) manyBatch {
	b := manyBatch{
		keys:  make([]string, 0, len(locks)),
		args:  make([]any, 1, 2*len(locks)+3),
		which: make([]int, 0, len(locks)),
	}
	b.args[0] = serverMillis(cfg.serverTTL())
	for i, k := range locks {
		k.mu.Lock()
		lost, done := k.lost, k.done
		k.mu.Unlock()
		switch {
		case done:
			errs[i] = k.releasedErr("extend")
		case lost != nil:
			errs[i] = lost
		default:
			b.keys = append(b.keys, k.key)
			b.args = append(b.args, k.holder.Prefix, k.holder.Hold)
			b.which = append(b.which, i)
		}
	}
	return b
}

// extendManyRound sends the batch to every node and returns the round's
// answers, and when it started on the locks' clock.
func (l *Locker) extendManyRound(b *manyBatch, cfg *config, bt *batchTrace) (quorum.Result[manyReply], time.Time) {
	keys := b.keys
	nonce, keep := callNonce(keys[0], cfg.nodeTimeout)
	cmd := conn.EvalSha(scripts.ExtendMany, keys, append(b.args, nonce, keep))
	timeout := cfg.nodeTimeout
	start := cfg.clock.Now()
	// The round serves many callers, none of whose contexts may end it;
	// each call has the node timeout.
	res := runRound(context.Background(), l, round[manyReply]{
		timeout: timeout,
		// Every node's answer is awaited (up to the node timeout): a
		// node-level majority does not decide every key. A key held on
		// only three of five nodes (an acquisition that missed some) needs
		// all three, which need not be among the first to answer. The
		// round ends once every key is decided (extended by a majority,
		// or past reaching one), so a slow node holds it up only while a
		// key still needs its answer; and each key's validity counts from
		// when its own majority was complete (see validity), not from the
		// round's end.
		waitAll: true,
		decided: func(res *quorum.Result[manyReply]) bool { return l.everyKeyDecided(res, len(keys)) },
		start: func(_ context.Context, i int, reply func(int, quorum.Vote, manyReply, error)) {
			began := bt.now()
			l.nodes[i].sendRaw(timeout, scripts.ExtendMany, keys, cmd, func(c *redis.Cmd) {
				at := cfg.clock.Since(start)
				s, err := c.Text()
				if err == nil && len(s) != len(keys) {
					err = fmt.Errorf("redlock: unexpected extend reply: %d results for %d keys", len(s), len(keys))
				}
				bt.node(i, began, keys, b.which, s, err)
				l.noteNode(i, err)
				if err != nil {
					reply(i, quorum.Failed, manyReply{}, err)
					return
				}
				reply(i, quorum.Yes, manyReply{s, at}, nil)
			})
		},
	})
	return res, start
}

// settleExtended moves the Until of each lock of the batch that the round
// extended in time, and gives each other lock its error in errs, marking
// lost those that the nodes say are not ours.
func (l *Locker) settleExtended(locks []*Lock, b *manyBatch, res *quorum.Result[manyReply], cfg *config, start time.Time, errs []error) {
	var failed sync.WaitGroup
	for j, i := range b.which {
		k := locks[i]
		if v := l.validity(res, j, cfg); v > 0 {
			k.mu.Lock()
			k.until = start.Add(v)
			k.mu.Unlock()
			continue
		}
		// The key's own round, to classify the failure as Extend does: a
		// majority too slow to leave any validity, or too few answers, is
		// an outage; a lock is lost only when the nodes say it is not ours.
		kr := quorum.Result[int64]{Replies: make([]quorum.Reply[int64], len(res.Replies))}
		for n, r := range res.Replies {
			rep := quorum.Reply[int64]{Node: n, Vote: r.Vote, Err: r.Err}
			if r.Vote == quorum.Yes {
				rep.Vote, rep.Value, rep.Err = decodeCompare(manyCode(r.Value.s[j]), nil)
			}
			kr.Add(rep)
		}
		// Told side by side, once every extended lock's Until has moved:
		// telling one may take a round (a ForceRelease is no expiry), and
		// many locks lost at once must not wait for each other's. No
		// caller's context ends the question: the round serves many.
		failed.Go(func() {
			err := error(k.notHeldGuarded(context.Background(), "extend", &kr))
			if errors.Is(err, ErrLockNotHeld) {
				k.markLost(err)
			}
			errs[i] = err
		})
	}
	failed.Wait()
}

// manyReply is one node's answer to extend_many.lua: a character per key,
// and when it came, counted from the round's start on the lock's clock.
type manyReply struct {
	s  string
	at time.Duration
}

// ours reports whether the node of r extended the j-th key.
func ours(r quorum.Reply[manyReply], j int) bool {
	return r.Vote == quorum.Yes && r.Value.s[j] == manyOurs
}

// everyKeyDecided reports whether each of the n keys of res is decided:
// extended on a majority of nodes, or unable to reach one with the nodes
// still silent.
func (l *Locker) everyKeyDecided(res *quorum.Result[manyReply], n int) bool {
	pending := res.Pending()
	if pending == 0 {
		return true
	}
	for j := range n {
		yes := 0
		for _, r := range res.Replies {
			if ours(r, j) {
				yes++
			}
		}
		if yes < l.need && yes+pending >= l.need {
			return false
		}
	}
	return true
}

// validity returns what is left of the TTL for the j-th key of res: a
// majority of nodes must have extended it, and its validity counts from
// the moment that majority was complete (the need-th of its answers to
// come), whatever the round waited for after; 0 or less when the key was
// not extended in time.
func (l *Locker) validity(res *quorum.Result[manyReply], j int, cfg *config) time.Duration {
	ats := make([]time.Duration, 0, len(res.Replies))
	for _, r := range res.Replies {
		if ours(r, j) {
			ats = append(ats, r.Value.at)
		}
	}
	if len(ats) < l.need {
		return 0
	}
	slices.Sort(ats)
	return clock.Validity(cfg.ttl, ats[l.need-1], cfg.driftFactor)
}
