// Package scripts holds the library's Lua scripts, embedded from the .lua
// files beside it: the one place they are read from.
package scripts

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Script is a Lua script and its source: calls go out as EVALSHA, and a
// node that answers NOSCRIPT (after a restart, say) gets the source with
// EVAL, which also caches it there.
type Script struct {
	*redis.Script
	// Src is the source sent with EVAL.
	Src string
	// SHA is the script's SHA1 as a command argument, boxed once: every
	// call's command line starts with it.
	SHA any
	// Fn, when set, names the function of Library that does what the
	// script does: a node that has the library gets FCALL Fn instead of
	// EVALSHA, the same keys and arguments.
	Fn string
	// FnArg is Fn as a command argument, boxed once (as SHA).
	FnArg any
	// guarded is the variant for a call with the restart guard on (see
	// Guarded); nil: the script itself.
	guarded *Script
	// lean, when set, is the function of a lean FCALL line (see FCall).
	lean any
}

// The restart guard's keys on every node: its memory marker (no expiry)
// and its quarantine. The guard's function also keeps GuardMarker +
// ":passed" (library.lua).
const (
	GuardMarker     = wire.GuardMarker
	GuardQuarantine = wire.GuardQuarantine
)

// AppendFCall appends to dst the FCALL line of a call of s whose EVALSHA
// line is line, for a server that has the library, and returns it: FCALL
// Fn with the same keys and arguments; or, for an acquisition of one key
// that is not fenced (of Acquire's guarded variant, acquire.lua's layout
// with ARGV[4] "0"), the lean form of library.lua's acquire_lean: the lock
// key; the value, TTL, prefix and maximum TTL. Nothing when s has no
// function. The line's elements are reused, not boxed again.
func (s *Script) AppendFCall(dst, line []any) []any {
	if s.Fn == "" {
		return dst
	}
	if k, ok := line[2].(int); ok && k == 4 && s.isLean(line[5], line[3+k:]) {
		args := line[3+k:]
		return append(dst, "fcall", s.lean, 1, line[3], args[0], args[1], args[2], args[4])
	}
	return append(append(dst, "fcall", s.FnArg), line[2:]...)
}

// FCallLen is the length of AppendFCall's line for a call of s with keys
// and args.
func (s *Script) FCallLen(keys []string, args []any) int {
	switch {
	case s.Fn == "":
		return 0
	case len(keys) == 4 && s.isLean(keys[2], args):
		return 8
	}
	return 3 + len(keys) + len(args)
}

// isLean reports whether a call of s with four keys, whose third is
// marker, and args goes in the lean form: acquire.lua's keys and seven
// arguments, ARGV[4] (fenced) "0", and the guard's keys by their
// standalone names, which acquire_lean reads without their being sent (a
// cluster's, which carry the lock's slot, must be sent).
func (s *Script) isLean(marker any, args []any) bool {
	return s.lean != nil && len(args) == 7 && args[3] == "0" && marker == GuardMarker
}

// newScript pastes holds.lua where src asks for it and drops the comment
// lines, which are for readers of the .lua files: every script then stays
// below the 16 KB that Redis takes in one argument from a connection that
// has not authenticated yet (more ends the connection), so that a missing
// password is always answered NOAUTH, never with a closed connection.
func newScript(src string) *Script {
	src = strip(src)
	s := &Script{Script: redis.NewScript(src), Src: src}
	s.SHA = s.Hash()
	All = append(All, s)
	return s
}

// strip pastes holds.lua where src asks for it and drops the comment lines.
func strip(src string) string {
	src = strings.ReplaceAll(src, "--[[holds.lua]]", holdsSrc)
	lines := strings.Split(src, "\n")
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool {
		return strings.HasPrefix(strings.TrimSpace(l), "--")
	}), "\n")
}

// All lists every script, for loading them on a new connection.
var All []*Script

// Each script, embedded from this directory, with its arguments and its replies.
var (
	// holds.lua reads and writes the holds in a lock's value; newScript
	// pastes it where a script says --[[holds.lua]].
	//go:embed holds.lua
	holdsSrc string

	// once.lua, put in front of a script whose answers a round counts,
	// makes a server answer each call once (see the core's callNonce).
	//go:embed once.lua
	onceSrc string

	// acquire.lua sets the key unless another token holds it; its keys and
	// arguments are an acquirePlan's (see the core's acquisition plan).
	//go:embed acquire.lua
	acquireSrc string
	Acquire    = newScript(acquireSrc)

	// release.lua deletes the key (or, with a cooldown, keeps it that long)
	// where our token holds it, and announces it on the channel.
	//go:embed release.lua
	releaseSrc string
	Release    = newScript(releaseSrc)

	// extend.lua lengthens the key's expiry where our token holds it.
	//go:embed extend.lua
	extendSrc string
	Extend    = newScript(onceSrc + extendSrc)

	// pttl.lua reads the key's PTTL where our token holds it.
	//go:embed pttl.lua
	pttlSrc string
	PTTL    = newScript(onceSrc + pttlSrc)

	// fence.lua raises a key's fencing counter to the holder's fence.
	//go:embed fence.lua
	fenceSrc string
	Fence    = newScript(onceSrc + fenceSrc)

	// inspect.lua reads the key's value, PTTL and fencing counter.
	//go:embed inspect.lua
	inspectSrc string
	Inspect    = newScript(onceSrc + inspectSrc)

	// force.lua deletes the key whoever holds it, announces it, and
	// leaves a note for the holder.
	//go:embed force.lua
	forceSrc string
	Force    = newScript(forceSrc)

	// forced.lua reads the notes force.lua leaves: whether a
	// ForceRelease removed a hold.
	//go:embed forced.lua
	forcedSrc string
	Forced    = newScript(forcedSrc)

	// bootstrap.lua seeds the restart guard's memory marker.
	//go:embed bootstrap.lua
	bootstrapSrc string
	Bootstrap    = newScript(bootstrapSrc)

	// The handoff script is release.lua then acquire.lua, pasted into
	// handoff.lua: one source of truth for both steps.
	//go:embed handoff.lua
	handoffTmpl string
	Handoff     = newScript(strings.NewReplacer(
		"--[[release.lua]]", releaseSrc,
		"--[[acquire.lua]]", acquireSrc,
	).Replace(handoffTmpl))

	// extend_many.lua is extend.lua for many keys, each with its own token
	// and hold; KeepAlive's extensions share its calls (see the core's extendMany).
	//go:embed extend_many.lua
	extendManySrc string
	ExtendMany    = newScript(onceSrc + extendManySrc)

	// acquire_multi.lua takes several keys at once, all or none: acquire.lua
	// pasted into it.
	//go:embed acquire_multi.lua
	acquireMultiTmpl string
	AcquireMulti     = newScript(strings.Replace(acquireMultiTmpl, "--[[acquire.lua]]", acquireSrc, 1))

	// multi.lua releases, extends or reads the TTL of a multi-key lock: the
	// single-key scripts pasted into it.
	//go:embed multi.lua
	multiTmpl string
	Multi     = newScript(onceSrc + strings.NewReplacer(
		"--[[release.lua]]", releaseSrc,
		"--[[extend.lua]]", extendSrc,
		"--[[pttl.lua]]", pttlSrc,
	).Replace(multiTmpl))

	// acquire_slot.lua takes one permit of a semaphore: the first free of
	// its slots, each tried with acquire.lua, pasted into it.
	//go:embed acquire_slot.lua
	acquireSlotTmpl string
	AcquireSlot     = newScript(strings.Replace(acquireSlotTmpl, "--[[acquire.lua]]", acquireSrc, 1))

	// extend_slot.lua extends a semaphore's permit and its size key:
	// extend.lua pasted into it.
	//go:embed extend_slot.lua
	extendSlotTmpl string
	ExtendSlot     = newScript(onceSrc + strings.Replace(extendSlotTmpl, "--[[extend.lua]]", extendSrc, 1))

	// rw_read.lua, rw_write.lua and rw_release.lua take a reader's lease,
	// take a read-write lock's writer key, and release a reader's lease:
	// acquire.lua or release.lua pasted into each.
	//go:embed rw_read.lua
	rwReadTmpl string
	RWRead     = newScript(strings.Replace(rwReadTmpl, "--[[acquire.lua]]", acquireSrc, 1))
	//go:embed rw_write.lua
	rwWriteTmpl string
	RWWrite     = newScript(strings.Replace(rwWriteTmpl, "--[[acquire.lua]]", acquireSrc, 1))
	//go:embed rw_release.lua
	rwReleaseTmpl string
	RWRelease     = newScript(strings.Replace(rwReleaseTmpl, "--[[release.lua]]", releaseSrc, 1))
	// sem_release.lua releases a permit, or undoes an attempt on a
	// semaphore's slots, and keeps the size key as long as the slots.
	//go:embed sem_release.lua
	semReleaseTmpl string
	SemRelease     = newScript(strings.Replace(semReleaseTmpl, "--[[release.lua]]", releaseSrc, 1))

	// announce.lua tells a key's waiters that its holder changed (a won
	// Campaign).
	//go:embed announce.lua
	announceSrc string
	Announce    = newScript(announceSrc)
)

// Library is the source of the Redis Function library that runs the
// restart guard's acquisitions (library.lua), for FUNCTION LOAD; its name,
// and its functions' names, carry a hash of its source, so that a name
// always means this source and versions coexist on a server.
//
// Library's functions are the guarded variants (Script.Guarded) of the
// acquisitions: Acquire, AcquireMulti, Handoff, AcquireSlot, RWRead and
// RWWrite. A variant's source is its script's own (a node without the
// library runs it, guard included, as before); its Fn is the library's
// function that does the same with the guard's reading of INFO kept
// between calls.
var Library = newLibrary()

// newLibrary pastes the scripts into library.lua, names it, and gives each
// acquisition its guarded variant.
func newLibrary() string {
	// Inside the library's functions, the scripts' acquire.lua is the
	// guarded one (library.lua's acquire), called as the scripts call theirs.
	guarded := "return acquire(KEYS, ARGV)"
	withGuarded := func(tmpl string) string { return strings.Replace(tmpl, "--[[acquire.lua]]", guarded, 1) }
	src := strip(strings.NewReplacer(
		"--[[acquire.lua]]", acquireSrc,
		"--[[acquire_multi.lua]]", withGuarded(acquireMultiTmpl),
		"--[[handoff.lua]]", withGuarded(strings.Replace(handoffTmpl, "--[[release.lua]]", releaseSrc, 1)),
		"--[[acquire_slot.lua]]", withGuarded(acquireSlotTmpl),
		"--[[rw_read.lua]]", withGuarded(rwReadTmpl),
		"--[[rw_write.lua]]", withGuarded(rwWriteTmpl),
	).Replace(libraryTmpl))
	src = strings.NewReplacer("--[[marker]]", GuardMarker, "--[[quarantine]]", GuardQuarantine).Replace(src)
	sum := sha1.Sum([]byte(src))
	name := "redlock_" + hex.EncodeToString(sum[:6])
	for fn, s := range map[string]*Script{
		"acquire": Acquire, "acquire_multi": AcquireMulti, "handoff": Handoff,
		"acquire_slot": AcquireSlot, "rw_read": RWRead, "rw_write": RWWrite,
	} {
		fn := name + "_" + fn
		s.guarded = &Script{Script: s.Script, Src: s.Src, SHA: s.SHA, Fn: fn, FnArg: fn}
	}
	Acquire.guarded.lean = name + "_acquire_lean"
	return "#!lua name=" + name + "\n" + strings.ReplaceAll(src, "--[[name]]", name)
}

// Guarded returns s's guarded variant when guard is true and s has one
// (AcquireGuarded for Acquire, say), else s.
func (s *Script) Guarded(guard bool) *Script {
	if guard && s.guarded != nil {
		return s.guarded
	}
	return s
}

//go:embed library.lua
var libraryTmpl string
