package redlock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// The scripts' arguments, and their replies turned into votes and node
// outcomes.

// decodeAcquire turns an acquire reply into a vote whose value is the fence
// (or 0, or the holds of a re-entry) when granted, the holder's PTTL when not.
func decodeAcquire(r int64, err error) (quorum.Vote, int64, error) {
	switch {
	case err != nil:
		return quorum.Failed, 0, err
	case r >= acquireGranted:
		return quorum.Yes, r, nil
	}
	return quorum.No, -r - 2, nil // the holder's PTTL, -1 without expiry
}

// acquireOutcome maps an acquire reply to a node outcome; the value of a No
// is the holder's PTTL.
func acquireOutcome(r quorum.Reply[int64]) NodeResult {
	switch r.Vote {
	case quorum.Yes:
		return NodeResult{Outcome: OutcomeOK}
	case quorum.No:
		ttl := time.Duration(r.Value) * time.Millisecond
		if r.Value < 0 {
			ttl = -1
		}
		return NodeResult{Outcome: OutcomeHeldByOther, TTL: ttl}
	case quorum.Failed:
		return NodeResult{Outcome: OutcomeError, Err: r.Err}
	}
	return NodeResult{Outcome: OutcomeNoReply}
}

// holder is what the scripts know a hold by (wire.Holder).
type holder = wire.Holder

// releaseArgs are the release script's arguments (wire.ReleaseArgs).
func releaseArgs(h holder, channel string, cooldownMs int64) []any {
	return wire.ReleaseArgs(h, channel, cooldownMs)
}

// extendArgs are the extend script's arguments, with a fresh call nonce
// (callNonce).
func extendArgs(key string, h holder, ttlMs int64, timeout time.Duration) []any {
	nonce, keep := callNonce(key, timeout)
	return wire.ExtendArgs(h, ttlMs, nonce, keep)
}

// pttlArgs are the pttl script's arguments, with a fresh call nonce.
func pttlArgs(key string, h holder, timeout time.Duration) []any {
	nonce, keep := callNonce(key, timeout)
	return wire.PTTLArgs(h, nonce, keep)
}

// callNonce returns a fresh nonce for one call to every node of a round
// whose calls have timeout, and how long, in ms, a server keeps it
// (once.lua): a server reached twice in the round, through two node
// addresses, answers the second copy DUPLICATE. Both copies run within the
// round (a copy that runs later is not counted), so twice the timeout, with
// 100 ms for the servers' clocks, is enough. The nonce starts with the
// hash tag of key's slot (wire.CallNonce), so that its key lives in the slot of
// the call's keys on a cluster, as a script's keys must.
func callNonce(key string, timeout time.Duration) (string, int64) {
	return wire.CallNonce(key, rand.Uint64()), serverMillis(2*timeout + 100*time.Millisecond)
}

// newHoldID returns a hold id for an acquisition with the caller's own
// token (WithToken): another Lock may hold the key with the same token, and
// each hold must be told apart. An acquisition with a fresh random token
// has hold id "1": its token is its own already.
func newHoldID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// decodeCompare turns a compare-and-X reply into a vote: Yes where our
// token held the key, No (with replyGone or replyOther) where it did not.
func decodeCompare(r int64, err error) (quorum.Vote, int64, error) {
	switch {
	case err != nil:
		return quorum.Failed, 0, err
	case r == replyOurs:
		return quorum.Yes, r, nil
	case r == replyGone || r == replyOther:
		return quorum.No, r, nil
	}
	return quorum.Failed, 0, fmt.Errorf("redlock: unexpected reply %d", r)
}

// compareOutcome maps a compare-and-X reply to a node outcome.
func compareOutcome(r quorum.Reply[int64]) NodeResult {
	switch r.Vote {
	case quorum.Yes:
		return NodeResult{Outcome: OutcomeOK}
	case quorum.No:
		if r.Value == replyOther {
			return NodeResult{Outcome: OutcomeHeldByOther, TTL: -1}
		}
		return NodeResult{Outcome: OutcomeMissing}
	case quorum.Failed:
		return NodeResult{Outcome: OutcomeError, Err: r.Err}
	}
	return NodeResult{Outcome: OutcomeNoReply}
}

// forceOutcome is a node's answer to force.lua: the count of keys it
// deleted, or an error.
func forceOutcome(r quorum.Reply[int64]) NodeResult {
	switch {
	case r.Vote == quorum.Failed:
		return NodeResult{Outcome: OutcomeError, Err: r.Err}
	case r.Vote == quorum.Yes && r.Value > 0:
		return NodeResult{Outcome: OutcomeOK}
	case r.Vote == quorum.Yes:
		return NodeResult{Outcome: OutcomeMissing}
	}
	return NodeResult{Outcome: OutcomeNoReply}
}

// decodePTTL turns a pttl reply into a vote: Yes with the PTTL where our
// token holds the key, No as decodeCompare's where it does not.
func decodePTTL(r int64, err error) (quorum.Vote, int64, error) {
	switch {
	case err != nil:
		return quorum.Failed, 0, err
	case r >= -1:
		return quorum.Yes, r, nil
	case r == pttlGone:
		return quorum.No, replyGone, nil
	case r == pttlOther:
		return quorum.No, replyOther, nil
	}
	return quorum.Failed, 0, errors.New("redlock: unexpected PTTL reply")
}

// fenceArgs are the fence script's arguments (wire.FenceArgs).
func fenceArgs(fence, lifetimeMs int64, h holder, nonce string, keepMs int64) []any {
	return wire.FenceArgs(fence, lifetimeMs, h, nonce, keepMs)
}

// decodeAny counts any answer, even an error, as done.
func decodeAny(r int64, _ error) (quorum.Vote, int64, error) { return quorum.Yes, r, nil }

// decodeDone is Yes on success, Failed on error.
func decodeDone(r int64, err error) (quorum.Vote, int64, error) {
	if err != nil {
		return quorum.Failed, 0, err
	}
	return quorum.Yes, r, nil
}

// decodeBestEffort is No whatever happened: the call does not count.
func decodeBestEffort(int64, error) (quorum.Vote, int64, error) { return quorum.No, 0, nil }

// decodeBootstrap is Yes when the node has its marker, Failed when it
// abstains: an ABSTAIN error reply (a marker from another server run, or an
// evicting maxmemory-policy) or a quarantine still running.
func decodeBootstrap(n int64, err error) (quorum.Vote, int64, error) {
	switch {
	case err != nil:
		return quorum.Failed, 0, err
	case n < 0:
		return quorum.Failed, 0, fmt.Errorf("%w for %v more: it lost its memory (flush, restart, reload, promotion or eviction)", ErrAbstained, time.Duration(-n)*time.Millisecond)
	}
	return quorum.Yes, n, nil
}

// inspectReply reads an inspect reply: the key's value, its PTTL and the
// fencing counter, and the leases listed in the index it was given.
func inspectReply(addr string, cmd *redis.Cmd) (ns NodeStatus, leases []string) {
	ns = NodeStatus{Addr: addr}
	vals, err := cmd.Slice()
	if err != nil {
		ns.Err = err
		return ns, nil
	}
	if len(vals) != 3 && len(vals) != 4 {
		ns.Err = errors.New("redlock: unexpected inspect reply")
		return ns, nil
	}
	if len(vals) == 4 {
		listed, _ := vals[3].([]any)
		for _, k := range listed {
			if k, ok := k.(string); ok {
				leases = append(leases, k)
			}
		}
	}
	if f, ok := vals[2].(int64); ok && f > 0 {
		ns.Fence = uint64(f)
	}
	v, ok := vals[0].(string)
	if !ok {
		return ns, leases // no key
	}
	pttl, _ := vals[1].(int64)
	ns.Held, ns.TTL = true, time.Duration(pttl)*time.Millisecond
	if pttl < 0 {
		ns.TTL = -1
	}
	// The value is token \0 holds \0 metadata; anything else was not written
	// by this library and is shown whole as the token.
	token, holds, meta, ok := wire.ParseValue(v)
	ns.Token = token
	if ok {
		ns.Metadata, ns.Holds = meta, len(holds) // no holds: a cooldown
		if len(holds) == 1 {
			if _, f, ok := strings.Cut(holds[0], ":"); ok {
				ns.confirmed, _ = strconv.ParseUint(f, 10, 64)
			}
		}
	}
	return ns, leases
}

// handoffArgs are the handoff script's arguments: the release's (announced
// on channel only if the key ends up free: the acquisition was refused),
// then the acquisition's.
func handoffArgs(h holder, channel string, acquire []any) []any {
	args := make([]any, 0, 4+len(acquire))
	args = append(args, releaseArgs(h, channel, 0)...)
	return append(args, acquire...)
}

// handoffReply is one node's answer to the handoff script.
type handoffReply struct {
	release int64 // release.lua's reply
	acquire int64 // acquire.lua's reply, unless acqErr
	acqErr  error // the acquisition was refused with an error (ABSTAIN)
}

// decodeHandoff reads a handoff reply. The vote is Yes where the node both
// released the old owner's key and granted the new owner's.
func decodeHandoff(c *redis.Cmd) (quorum.Vote, handoffReply, error) {
	vals, err := c.Slice()
	if err != nil {
		return quorum.Failed, handoffReply{}, err
	}
	bad := fmt.Errorf("redlock: unexpected handoff reply %v", vals)
	if len(vals) != 2 {
		return quorum.Failed, handoffReply{}, bad
	}
	var r handoffReply
	rel, ok := vals[0].(int64)
	if !ok || rel < replyOther || rel > replyOurs {
		return quorum.Failed, handoffReply{}, bad
	}
	r.release = rel
	switch a := vals[1].(type) {
	case int64:
		r.acquire = a
	case string:
		r.acqErr = errors.New(a)
	default:
		return quorum.Failed, handoffReply{}, bad
	}
	if r.release == replyOurs && r.acqErr == nil && r.acquire >= acquireGranted {
		return quorum.Yes, r, nil
	}
	return quorum.No, r, nil
}

// otherSize is the size that a node's reply err says its semaphore has,
// when err is acquire_slot.lua's SIZE error: the node keeps permits of
// that size.
func otherSize(err error) (int, bool) {
	code, size, ok := wire.ErrorReply(err)
	if !ok || code != wire.CodeSize {
		return 0, false
	}
	n, err := strconv.Atoi(size)
	return n, err == nil
}

// isSizeReply reports whether err is acquire_slot.lua's SIZE error.
func isSizeReply(err error) bool {
	_, ok := otherSize(err)
	return ok
}

// abstention is a node's abstention under the restart guard, as its
// script's error reply said it (ABSTAIN and the reason); its text says it
// in words. It matches ErrAbstained, and unwraps to the reply.
type abstention struct{ reply error }

func (e *abstention) Error() string        { return replyText(e.reply.Error()) }
func (e *abstention) Is(target error) bool { return target == ErrAbstained }
func (e *abstention) Unwrap() error        { return e.reply }

// replyError is a node's error err, with a script's abstention decoded
// into one that matches ErrAbstained: the one place the reply code is read.
func replyError(err error) error {
	if code, _, ok := wire.ErrorReply(err); ok && code == wire.CodeAbstain {
		return &abstention{reply: err}
	}
	return err
}

// notHeldError is a reason for ErrLockNotHeld; it matches ErrLockNotHeld
// through errors.Is.
type notHeldError struct{ msg string }

func (e *notHeldError) Error() string { return e.msg }
func (e *notHeldError) Unwrap() error { return ErrLockNotHeld }

// invalidNode reports whether a node's error says that the Locker's
// configuration is wrong: ErrInvalid, or a node that reached a server
