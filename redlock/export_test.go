package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/clock"
	"github.com/quorumlock/redlock/redlock/internal/conn"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// LineLen reports how many goroutines of l wait in line for key (tests
// only).
func LineLen(l *Locker, key string) int {
	l.gates.mu.Lock()
	defer l.gates.mu.Unlock()
	if ln := l.gates.lines[key]; ln != nil {
		return ln.users
	}
	return 0
}

// Offered reports whether the head of key's line has offered itself for a
// handoff (tests only).
func Offered(l *Locker, key string) bool {
	l.gates.mu.Lock()
	defer l.gates.mu.Unlock()
	ln := l.gates.lines[key]
	return ln != nil && ln.offer != nil
}

// Closing reports whether a Close of l is under way: it waits for, or has
// taken, the Locker's lock (tests only).
func Closing(l *Locker) bool {
	if l.mu.TryRLock() {
		l.mu.RUnlock()
		return false
	}
	return true
}

// HoldQueue stops node's worker for key's queue from sending, as a busy
// process would, until the returned func is called (tests only).
func HoldQueue(l *Locker, node int, key string) (letGo func()) {
	return l.nodes[node].pipe.Hold(key)
}

// ScriptSHA returns the SHA1 of the script that the library sends for the
// file name in scripts/ (tests only): what EVALSHA names.
func ScriptSHA(name string) string {
	switch name {
	case "fence.lua":
		return scripts.Fence.Hash()
	case "acquire.lua":
		return scripts.Acquire.Hash()
	case "release.lua":
		return scripts.Release.Hash()
	case "extend.lua":
		return scripts.Extend.Hash()
	case "extend_many.lua":
		return scripts.ExtendMany.Hash()
	case "pttl.lua":
		return scripts.PTTL.Hash()
	case "inspect.lua":
		return scripts.Inspect.Hash()
	}
	panic("no script " + name)
}

// WorkersPerNode is the number of workers New starts per node (tests only).
const WorkersPerNode = conn.WorkersPerNode

// WithClock sets the time source used for validity arithmetic (tests only;
// default clock.Real).
func WithClock(c clock.Clock) LockOption { return withClock(c) }

// MultiLineLen reports how many goroutines of l wait in line for the set
// of keys (tests only).
func MultiLineLen(l *Locker, keys []string) int { return LineLen(l, multiLine(keys)) }

// SameQueue reports whether calls whose first keys are a and b go to the
// same queue of a node (tests only).
func SameQueue(a, b string) bool { return conn.QueueOf(a) == conn.QueueOf(b) }

// BeforeOffer makes f run just before the head of a line posts its offer
// for a handoff, until restore (tests only; set it while no Obtain runs).
func BeforeOffer(f func(ctx context.Context)) (restore func()) {
	beforeOffer = f
	return func() { beforeOffer = nil }
}

// WithShortFenceLifetime is WithFenceLifetime without its lower bound, for
// tests that watch counters expire (tests only).
func WithShortFenceLifetime(d time.Duration) LockOption {
	return lockOption(func(c *config) { c.fenceLife, c.fenceLifeAnyway = d, true })
}

// ConfirmFence makes an acquisition write its fence back into its own hold
// on every node, as Campaign's does, so that Leader and Observe can read it
// as a term (tests only).
var ConfirmFence = confirmFence

// WithOutageLog sets how long an Obtain waits out an outage before it logs
// it, and how often again (tests only; DefaultOutageLog otherwise).
func WithOutageLog(d time.Duration) Option {
	return lockerOption(func(c *config) { c.outageLog = d })
}
