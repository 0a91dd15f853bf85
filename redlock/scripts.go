package redlock

import (
	_ "embed"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
)

// script is a Lua script and its source: calls go out as EVALSHA, and a
// node that answers NOSCRIPT (after a restart, say) gets the source with
// EVAL, which also caches it there.
type script struct {
	*redis.Script
	src string
	// hash is the script's SHA1 as a command argument, boxed once: every
	// call's command line starts with it.
	hash any
}

// newScript pastes holds.lua where src asks for it and drops the comment
// lines, which are for readers of the .lua files: every script then stays
// below the 16 KB that Redis takes in one argument from a connection that
// has not authenticated yet (more ends the connection), so that a missing
// password is always answered NOAUTH, never with a closed connection.
func newScript(src string) *script {
	src = strings.ReplaceAll(src, "--[[holds.lua]]", holdsSrc)
	lines := strings.Split(src, "\n")
	src = strings.Join(slices.DeleteFunc(lines, func(l string) bool {
		return strings.HasPrefix(strings.TrimSpace(l), "--")
	}), "\n")
	s := &script{Script: redis.NewScript(src), src: src}
	s.hash = s.Hash()
	scripts = append(scripts, s)
	return s
}

// scripts lists every script, for loading them on a new connection.
var scripts []*script

// decodeFunc turns a script's integer reply into a node's vote.
type decodeFunc = func(int64, error) (quorum.Vote, int64, error)

// The scripts' replies, in one table. Each script's own section below says
// which it returns.
const (
	// The compare-and-X scripts (release, extend): what our token found.
	replyOurs  = 1  // our token held the key (and the action was done)
	replyGone  = 0  // the key is gone
	replyOther = -1 // another token holds the key

	// pttl.lua answers the PTTL (-1: no expiry) where our token holds the
	// key, else one of these.
	pttlGone  = -2
	pttlOther = -3

	// acquire.lua answers at least acquireGranted when it granted (the
	// fence, 0, or the holds of a re-entry), else -(holder's PTTL + 2).
	acquireGranted = 0
)

// Each script, embedded from scripts/, with its arguments and its replies.
var (
	// holds.lua reads and writes the holds in a lock's value; newScript
	// pastes it where a script says --[[holds.lua]].
	//go:embed scripts/holds.lua
	holdsSrc string

	// once.lua, put in front of a script whose answers a round counts,
	// makes a server answer each call once (see callNonce).
	//go:embed scripts/once.lua
	onceSrc string

	// acquire.lua sets the key unless another token holds it; its keys and
	// arguments are an acquirePlan's (see newPlan).
	//go:embed scripts/acquire.lua
	acquireSrc    string
	acquireScript = newScript(acquireSrc)

	// release.lua deletes the key (or, with a cooldown, keeps it that long)
	// where our token holds it, and announces it on the channel.
	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = newScript(releaseSrc)

	// extend.lua lengthens the key's expiry where our token holds it.
	//go:embed scripts/extend.lua
	extendSrc    string
	extendScript = newScript(onceSrc + extendSrc)

	// pttl.lua reads the key's PTTL where our token holds it.
	//go:embed scripts/pttl.lua
	pttlSrc    string
	pttlScript = newScript(onceSrc + pttlSrc)

	// fence.lua raises a key's fencing counter to the holder's fence.
	//go:embed scripts/fence.lua
	fenceSrc    string
	fenceScript = newScript(onceSrc + fenceSrc)

	// inspect.lua reads the key's value, PTTL and fencing counter.
	//go:embed scripts/inspect.lua
	inspectSrc    string
	inspectScript = newScript(onceSrc + inspectSrc)

	// force.lua deletes the key whoever holds it, and announces it.
	//go:embed scripts/force.lua
	forceSrc    string
	forceScript = newScript(forceSrc)

	// bootstrap.lua seeds the restart guard's memory marker.
	//go:embed scripts/bootstrap.lua
	bootstrapSrc    string
	bootstrapScript = newScript(bootstrapSrc)

	// The handoff script is release.lua then acquire.lua, pasted into
	// handoff.lua: one source of truth for both steps.
	//go:embed scripts/handoff.lua
	handoffTmpl   string
	handoffScript = newScript(strings.NewReplacer(
		"--[[release.lua]]", releaseSrc,
		"--[[acquire.lua]]", acquireSrc,
	).Replace(handoffTmpl))

	// extend_many.lua is extend.lua for many keys, each with its own token
	// and hold; KeepAlive's extensions share its calls (see extendMany).
	//go:embed scripts/extend_many.lua
	extendManySrc    string
	extendManyScript = newScript(onceSrc + extendManySrc)

	// acquire_multi.lua takes several keys at once, all or none: acquire.lua
	// pasted into it.
	//go:embed scripts/acquire_multi.lua
	acquireMultiTmpl   string
	acquireMultiScript = newScript(strings.Replace(acquireMultiTmpl, "--[[acquire.lua]]", acquireSrc, 1))

	// multi.lua releases, extends or reads the TTL of a multi-key lock: the
	// single-key scripts pasted into it.
	//go:embed scripts/multi.lua
	multiTmpl   string
	multiScript = newScript(onceSrc + strings.NewReplacer(
		"--[[release.lua]]", releaseSrc,
		"--[[extend.lua]]", extendSrc,
		"--[[pttl.lua]]", pttlSrc,
	).Replace(multiTmpl))

	// announce.lua tells a key's waiters that its holder changed (a won
	// Campaign).
	//go:embed scripts/announce.lua
	announceSrc    string
	announceScript = newScript(announceSrc)
)
