package redlock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA; go-redis falls back to EVAL (which also
// caches the script on the server) when a node answers NOSCRIPT, after a
// restart for instance.
var (
	//go:embed scripts/acquire.lua
	acquireSrc    string
	acquireScript = redis.NewScript(acquireSrc)

	//go:embed scripts/release.lua
	releaseSrc    string
	releaseScript = redis.NewScript(releaseSrc)

	//go:embed scripts/extend.lua
	extendSrc    string
	extendScript = redis.NewScript(extendSrc)

	//go:embed scripts/inspect.lua
	inspectSrc    string
	inspectScript = redis.NewScript(inspectSrc)

	//go:embed scripts/force.lua
	forceSrc    string
	forceScript = redis.NewScript(forceSrc)

	//go:embed scripts/fence.lua
	fenceSrc    string
	fenceScript = redis.NewScript(fenceSrc)

	//go:embed scripts/bootstrap.lua
	bootstrapSrc    string
	bootstrapScript = redis.NewScript(bootstrapSrc)

	//go:embed scripts/pttl.lua
	pttlSrc    string
	pttlScript = redis.NewScript(pttlSrc)
)

// Replies of the compare-and-X scripts.
const (
	replyOurs  = 1  // our token held the key (and the action was done)
	replyGone  = 0  // the key is gone
	replyOther = -1 // another token holds the key
)

// releaseChannel is where the release script announces that key is free.
func releaseChannel(key string) string { return "redlock:released:" + key }

// Keys of the fencing counters and of the restart guard. They never expire.
const (
	fencePrefix     = "redlock:fence:"
	guardMarker     = "redlock:guard:marker"
	guardQuarantine = "redlock:guard:quarantine"
)

// fenceKey is the key of the fencing counter of a lock key.
func fenceKey(key string) string { return fencePrefix + key }

// scriptSource maps each script to its source, for EVAL after NOSCRIPT.
var scriptSource = map[*redis.Script]string{
	acquireScript:   acquireSrc,
	releaseScript:   releaseSrc,
	extendScript:    extendSrc,
	pttlScript:      pttlSrc,
	inspectScript:   inspectSrc,
	forceScript:     forceSrc,
	fenceScript:     fenceSrc,
	bootstrapScript: bootstrapSrc,
}
