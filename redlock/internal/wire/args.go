package wire

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Each script's arguments, in the order its ARGV takes them (the .lua
// files' headers say what each is).

// AcquireArgs are acquire.lua's first three arguments, all that a plain
// acquisition (no fencing, no guard) sends: the value, the TTL in ms and
// the holder's prefix.
func AcquireArgs(value string, ttlMs int64, h Holder) []any {
	return []any{value, ttlMs, h.Prefix}
}

// AcquireFull holds acquire.lua's seven arguments: AcquireArgs's three,
// then whether the lock is fenced, the restart guard's maximum TTL in ms
// (0: off), the fencing counter's lifetime in ms and the counter's
// offered start.
type AcquireFull struct {
	Value                      string
	TTLMs                      int64
	Holder                     Holder
	Fenced                     bool
	GuardMs, LifetimeMs, Start int64
}

// Args returns the arguments in ARGV's order (fenced as "1" or "0"), then
// more (the arguments of a script that pastes acquire.lua in).
func (a AcquireFull) Args(more ...any) []any {
	f := "0"
	if a.Fenced {
		f = "1"
	}
	return append([]any{a.Value, a.TTLMs, a.Holder.Prefix, f, a.GuardMs, a.LifetimeMs, a.Start}, more...)
}

// AcquireStartArg is the index of the counter's start in AcquireFull.Args.
const AcquireStartArg = 6

// ReleaseArgs are release.lua's arguments: the owner's prefix, the channel
// that announces the release ("" for none), the cooldown in ms (0: delete
// the key), and the hold id.
func ReleaseArgs(h Holder, channel string, cooldownMs int64) []any {
	return []any{h.Prefix, channel, cooldownMs, h.Hold}
}

// ExtendArgs are extend.lua's arguments: the owner's prefix, the TTL in
// ms, the hold id, and the call's nonce and how long to keep it (once.lua).
func ExtendArgs(h Holder, ttlMs int64, nonce string, keepMs int64) []any {
	return []any{h.Prefix, ttlMs, h.Hold, nonce, keepMs}
}

// PTTLArgs are pttl.lua's arguments: the owner's prefix, the hold id, and
// the call's nonce and how long to keep it.
func PTTLArgs(h Holder, nonce string, keepMs int64) []any {
	return []any{h.Prefix, h.Hold, nonce, keepMs}
}

// FenceArgs are fence.lua's arguments: the fence, the counter's lifetime
// in ms, the holder's prefix and hold id, and the call's nonce ("" for a
// write-back that no round counts) and how long to keep it.
func FenceArgs(fence, lifetimeMs int64, h Holder, nonce string, keepMs int64) []any {
	return []any{fence, lifetimeMs, h.Prefix, h.Hold, nonce, keepMs}
}

// The scripts' integer replies.
const (
	// The compare-and-X scripts (release, extend): what our token found.
	ReplyOurs  = 1  // our token held the key (and the action was done)
	ReplyGone  = 0  // the key is gone
	ReplyOther = -1 // another token holds the key

	// pttl.lua answers the PTTL (-1: no expiry) where our token holds the
	// key, else one of these.
	PTTLGone  = -2
	PTTLOther = -3

	// acquire.lua answers at least AcquireGranted when it granted (the
	// fence, 0, or the holds of a re-entry), else -(holder's PTTL + 2).
	AcquireGranted = 0
)

// The scripts' error replies start with a code; what follows is for
// people.
const (
	// CodeAbstain: the node abstains under the restart guard.
	CodeAbstain = "ABSTAIN"
	// CodeSize: a semaphore's size key says another size, which follows.
	CodeSize = "SIZE"
	// CodeDuplicate: this server answered the same call through another
	// node address.
	CodeDuplicate = "DUPLICATE"
)

// ErrorReply splits err, when it is a script's error reply, into its code
// and what follows it; ok is false for any other error.
func ErrorReply(err error) (code, rest string, ok bool) {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return "", "", false
	}
	code, rest, _ = strings.Cut(re.Error(), " ")
	return code, rest, true
}
