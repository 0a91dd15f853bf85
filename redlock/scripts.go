package redlock

import (
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// script is a Lua script and its source: calls go out as EVALSHA, and a
// node that answers NOSCRIPT (after a restart, say) gets the source with
// EVAL, which also caches it there.
type script struct {
	*redis.Script
	src string
}

func newScript(src string) *script {
	s := &script{Script: redis.NewScript(src), src: src}
	scripts = append(scripts, s)
	return s
}

// scripts lists every script, for loading them on a new connection.
var scripts []*script

// The scripts, embedded from scripts/.
var (
	//go:embed scripts/acquire.lua
	acquireSrc    string
	acquireScript = newScript(acquireSrc)

	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = newScript(releaseSrc)

	//go:embed scripts/extend.lua
	extendSrc    string
	extendScript = newScript(extendSrc)

	//go:embed scripts/inspect.lua
	inspectSrc    string
	inspectScript = newScript(inspectSrc)

	//go:embed scripts/force.lua
	forceSrc    string
	forceScript = newScript(forceSrc)

	//go:embed scripts/fence.lua
	fenceSrc    string
	fenceScript = newScript(fenceSrc)

	//go:embed scripts/bootstrap.lua
	bootstrapSrc    string
	bootstrapScript = newScript(bootstrapSrc)

	//go:embed scripts/pttl.lua
	pttlSrc    string
	pttlScript = newScript(pttlSrc)

	// The handoff script is release.lua then acquire.lua, pasted into
	// handoff.lua: one source of truth for both steps.
	//go:embed scripts/handoff.lua
	handoffTmpl   string
	handoffScript = newScript(strings.NewReplacer(
		"--[[release.lua]]", releaseSrc,
		"--[[acquire.lua]]", acquireSrc,
	).Replace(handoffTmpl))
)

// Replies of the compare-and-X scripts.
const (
	replyOurs  = 1  // our token held the key (and the action was done)
	replyGone  = 0  // the key is gone
	replyOther = -1 // another token holds the key
)

// releaseChannel is where the release script announces that key is free.
func releaseChannel(key string) string { return "redlock:released:" + key }

// Keys of the fencing counters and of the restart guard. The guard's keys
// never expire; a counter expires after defaultFenceLifetime without a
// grant or write-back (see WithFencing).
const (
	fencePrefix     = "redlock:fence:"
	guardMarker     = "redlock:guard:marker"
	guardQuarantine = "redlock:guard:quarantine"
)

// fenceKey is the key of the fencing counter of a lock key.
func fenceKey(key string) string { return fencePrefix + key }
