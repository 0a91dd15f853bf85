package redlock

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// settle decides what becomes of an acquisition's stragglers, the nodes
// that answer after its round was decided. Until the acquisition is
// concluded (the fence write-back may still fail it) their replies are
// kept. Once it is, a failed acquisition is undone on every straggler that
// may have applied it, and a fenced lock has its fence written back to
// every straggler that did not grant that very fence (a node that grants
// late after another holder counted past ours, say), so that a re-entry
// reads the fence back there.
type settle struct {
	l *Locker
	// kind and plan make the undo that takes the acquisition's hold off a
	// straggler that granted (built only when one is needed).
	kind    *lockKind
	plan    *acquirePlan
	timeout time.Duration
	// stragglerCall, when set, returns the call to send to a node that
	// answered a won round late (the lock kind's stragglerCall).
	stragglerCall func(quorum.Reply[int64]) (scriptCall, bool)

	// shed is set once the acquisition has failed: its calls still queued
	// for a node are then never sent (see conn.Call.Shed). unsent says
	// per node that its call was shed, then or earlier (it waited past the
	// node timeout, conn.Call.Expires): the undo there is shed too. Small
	// clusters' flags live in the settle itself.
	shed   atomic.Bool
	unsent []atomic.Bool
	flags  [7]atomic.Bool
	// acquires and undos are the shedding of the acquisition's calls
	// and of its undo's.
	acquires, undos shedding
	// lateGrant, if set, is told when a straggler grants the failed
	// acquisition (acquisition.lateGrant).
	lateGrant chan<- struct{}

	mu     sync.Mutex
	done   bool
	failed bool
	// rest is the fence to write back to stragglers; nil for none.
	rest *fenceWrite
	// early holds the replies that came before the acquisition was
	// concluded.
	early []quorum.Reply[int64]
}

// fenceWrite is a fence write-back of the hold of holder on key.
type fenceWrite struct {
	key, counter      string // the lock key and its fencing counter
	holder            holder
	fence, lifetimeMs int64
	// queue is the key of the nodes' queue the acquisition went on: the
	// write-back follows it there.
	queue string
}

// call is the write-back's script call, for a round that counts its
// answers with nonce (callNonce; "" for none) kept keepMs.
func (fw *fenceWrite) call(nonce string, keepMs int64) scriptCall {
	keys := []string{fw.key, fw.counter}
	return scriptCall{script: scripts.Fence, keys: keys, args: fenceArgs(fw.fence, fw.lifetimeMs, fw.holder, nonce, keepMs), queue: fw.queue}
}

// settler returns the settle of an acquisition of plan p, of a lock of
// kind kd, whose node calls have timeout.
func (l *Locker) settler(kd *lockKind, p *acquirePlan, timeout time.Duration) *settle {
	s := &settle{l: l, kind: kd, plan: p, timeout: timeout}
	if n := len(l.nodes); n <= len(s.flags) {
		s.unsent = s.flags[:n]
	} else {
		s.unsent = make([]atomic.Bool, n)
	}
	s.acquires = shedding{flag: &s.shed, unsent: s.unsent, expires: true}
	s.undos = shedding{on: s.unsent}
	if kd.stragglerCall != nil {
		s.stragglerCall = func(r quorum.Reply[int64]) (scriptCall, bool) { return kd.stragglerCall(p, r) }
	}
	return s
}

// arrived is a straggler's reply (an acquire round's Late). It is called
// with a count held on the Locker's background group.
func (s *settle) arrived(r quorum.Reply[int64]) {
	s.mu.Lock()
	if !s.done {
		s.early = append(s.early, r)
		s.mu.Unlock()
		return
	}
	failed, rest := s.failed, s.rest
	s.mu.Unlock()
	s.act(r, failed, rest)
}

// succeed concludes a granted acquisition whose stragglers need rest (nil
// for nothing) and deals with those that have answered so far.
func (s *settle) succeed(rest *fenceWrite) {
	for _, r := range s.finish(false, rest) {
		s.act(r, false, rest)
	}
}

// fail concludes a failed acquisition and returns the stragglers so far
// that must be undone, for the caller's undo round.
func (s *settle) fail() []int {
	var undo []int
	for _, r := range s.finish(true, nil) {
		if mustUndo(r) {
			undo = append(undo, r.Node)
		}
		s.grantedLate(r)
	}
	s.shed.Store(true)
	return undo
}

// grantedLate tells the acquisition, if it listens, that straggler r of its
// failed attempt granted: the key was free there, most likely a release on
// its way, whose announcements may all have come already (see
// waiter.sleep).
func (s *settle) grantedLate(r quorum.Reply[int64]) {
	if r.Vote != quorum.Yes || s.lateGrant == nil {
		return
	}
	select {
	case s.lateGrant <- struct{}{}:
	default:
	}
}

func (s *settle) finish(failed bool, rest *fenceWrite) []quorum.Reply[int64] {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done, s.failed, s.rest = true, failed, rest
	early := s.early
	s.early = nil
	return early
}

// act does with one straggler's reply what the concluded acquisition
// needs.
func (s *settle) act(r quorum.Reply[int64], failed bool, rest *fenceWrite) {
	switch {
	case errors.Is(r.Err, conn.ErrShed):
		// The call never reached its node: nothing to undo there, and no
		// grant there to give the fence.
	case failed:
		if mustUndo(r) {
			s.l.sendOn(r.Node, s.timeout, s.kind.undo(s.plan.lockKeys, s.plan.holder, false))
		}
		s.grantedLate(r)
	case s.stragglerCall != nil:
		if c, ok := s.stragglerCall(r); ok {
			s.l.sendOn(r.Node, s.timeout, c)
		}
	case rest != nil && !answered(r, rest.fence):
		s.l.sendOn(r.Node, s.timeout, rest.call("", 0))
	}
}

// sendOn queues call c on node i outside of any round, with its own
// timeout, whatever became of the caller: the undo of a straggler's grant,
// a fence write-back. It does not wait and ignores the reply; the Locker's
// background group tracks it, so that Close waits for it. The caller holds
// the guard or a count on bg (a straggling call's). Queued, never sent
// inline: it may run in a straggler's reply, on a worker that other calls
// wait for. Best effort: a key left behind on an unreachable node expires
// by its TTL and only delays others, it never breaks mutual exclusion.
func (l *Locker) sendOn(i int, timeout time.Duration, c scriptCall) {
	l.bg.Add(1)
	newNodeCall(timeout, c, decodeBestEffort).send(&l.nodes[i], i, func(int, quorum.Vote, int64, error) { l.bg.Done() }, false)
}
