package redlock

import (
	"context"
	"time"
)

// Observer sees what a Locker does (docs/observability.md); redlockotel is
// one for OpenTelemetry. Its methods run on the lock's path, many at once:
// safe for concurrent use, never blocking, never calling the Locker. Embed
// NopObserver to implement only some.
type Observer interface {
	// OpStart begins an operation, in the caller's goroutine; the context
	// it returns (ctx, or one with values added: a span) goes to its events.
	OpStart(ctx context.Context, op Op, key string) context.Context
	// OpDone ends each OpStart, in the same goroutine.
	OpDone(ctx context.Context, e OpEvent)
	// Waited reports each sleep of Obtain between two attempts.
	Waited(ctx context.Context, e WaitEvent)
	// NodeDone reports each node's answer, before the round counts it (a
	// straggler's after OpDone); a KeepAlive round's, once per lock.
	NodeDone(ctx context.Context, e NodeEvent)
	// Lost reports a loss just before KeepAlive cancels the work's ctx.
	Lost(ctx context.Context, e LossEvent)
}

// NopObserver does nothing: embed it to implement only some methods.
type NopObserver struct{}

// OpStart returns ctx.
func (NopObserver) OpStart(ctx context.Context, _ Op, _ string) context.Context { return ctx }

// OpDone does nothing.
func (NopObserver) OpDone(context.Context, OpEvent) {}

// Waited does nothing.
func (NopObserver) Waited(context.Context, WaitEvent) {}

// NodeDone does nothing.
func (NopObserver) NodeDone(context.Context, NodeEvent) {}

// Lost does nothing.
func (NopObserver) Lost(context.Context, LossEvent) {}

// Op names an operation that an Observer sees.
type Op string

// The operations an Observer sees (ObtainMulti's key: its keys joined by
// commas); OpTTL and OpHandoff have node events only.
const (
	OpObtain       Op = "obtain"        // Obtain, TryObtain, ObtainMulti, TryObtainMulti, Do's acquisition
	OpRelease      Op = "release"       // Release, ReleaseAfter, Do's release
	OpExtend       Op = "extend"        // Extend, and KeepAlive's and Do's extensions
	OpTTL          Op = "ttl"           // Lock.TTL
	OpHandoff      Op = "handoff"       // a Release's handoff round
	OpForceRelease Op = "force-release" // Locker.ForceRelease
)

// OpEvent is an operation that ended.
type OpEvent struct {
	Op       Op
	Key      string
	Start    time.Time     // when it began, by the local clock
	Latency  time.Duration // how long it took
	Wait     time.Duration // OpObtain: the part spent sleeping, in line or awaiting a handoff
	Attempts int           // OpObtain: acquisition rounds run by the call itself
	Held     time.Duration // OpRelease: how long the lock had been held
	Fence    uint64        // OpObtain with WithFencing: the lock's fence
	Err      error         // nil on success; errors.Is tells the outcome
}

// WaitEvent is one sleep of Obtain between two attempts.
type WaitEvent struct {
	Key      string
	Start    time.Time
	Duration time.Duration
}

// NodeEvent is one node's answer in a round (an error for a call not sent
// to a node silent for a node timeout; none for a failed attempt's).
type NodeEvent struct {
	Op        Op
	Key       string
	Node      int    // the node's index, in the order the clients were given
	Addr      string // credentials removed
	Outcome   Outcome
	Abstained bool          // refused under the restart guard (Outcome is OutcomeError)
	Latency   time.Duration // from the round's call to the answer, queueing included
	Err       error         // the node's error when Outcome is OutcomeError
}

// LossEvent is a loss that KeepAlive signalled to the work.
type LossEvent struct {
	Key   string
	Cause error         // the work's cancel cause: ErrLockLost, with ErrLockExpired if no extension was in time
	Left  time.Duration // what was left of the validity when the work was told
}

// WithObserver gives the Locker an Observer (nil: ErrInvalid; default none).
func WithObserver(o Observer) Option {
	return lockerOption(func(c *config) { c.obs = &observer{o: o} })
}
