package conn

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The caller's go-redis hooks (redisotel, a metrics hook) see every
// command and pipeline the lock sends, though it sends them on
// connections of its own. go-redis keeps a client's hooks private (and
// Client.WithTimeout's copy drops them); what it offers is Client.Conn: a
// Conn with a copy of the client's hooks, which borrows a connection from
// the client's pool only when a command reaches the end of its hook
// chain, and whose own AddHook leaves the client unchanged. So each pipe
// keeps such a Conn of the caller's client, with one hook of ours added
// innermost (callerTail), and its own clients get a hook (bridge) that
// passes each command and pipeline through that Conn: the caller's hooks
// run, then callerTail, which hands the command back to the lock's own
// chain, to go out on the lock's connection as before. No command reaches
// the end of the Conn's chain, so it never borrows a connection of the
// caller's, and is never closed. A Conn is not for concurrent use because
// of the connection it would hold; its hook chain is an immutable
// snapshot, safe to run from many goroutines.
//
// The caller's hooks are the ones it had when the pipe was made: a hook
// added to the client after New is not seen. Dials are not passed through
// them (go-redis calls dial hooks from its pool alone; the lock dials with
// the caller's Dialer), nor are the release subscriptions' commands, which
// go-redis does not pass to hooks.

// processKey and pipelineKey are the context keys under which bridge
// passes callerTail the rest of the lock's own chain: a redis.ProcessHook
// and a redis.ProcessPipelineHook. A worker's context carries them in
// fields of its own (see deadlineCtx), so that its calls allocate no
// context for them.
type (
	processKey  struct{}
	pipelineKey struct{}
)

// errHookContext fails a command whose context lost the bridge's value on
// its way through the caller's hooks (a hook that replaced the context
// with one not derived from it): the command is not sent, since the only
// way on would be the caller's own connections.
var errHookContext = errors.New("redlock: a go-redis hook of the client replaced the call's context; the call was not sent")

// callerTail is the innermost hook of the Conn of the caller's client: it
// ends the chain by handing the command back to the lock's own chain.
type callerTail struct{}

func (callerTail) DialHook(next redis.DialHook) redis.DialHook { return next }

func (callerTail) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		next, _ := ctx.Value(processKey{}).(redis.ProcessHook)
		if next == nil {
			return errHookContext
		}
		return next(ctx, cmd)
	}
}

func (callerTail) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		next, _ := ctx.Value(pipelineKey{}).(redis.ProcessPipelineHook)
		if next == nil {
			for _, cmd := range cmds {
				cmd.SetErr(errHookContext)
			}
			return errHookContext
		}
		return next(ctx, cmds)
	}
}

// bridge is the hook of the lock's own clients that runs each command and
// pipeline through the caller's hooks (see above).
type bridge struct {
	// caller is a Conn of the caller's client, with callerTail added.
	caller *redis.Conn
}

// newBridge returns the bridge to c's hooks.
func newBridge(c *redis.Client) bridge {
	cp := c.Conn()
	cp.AddHook(callerTail{})
	return bridge{caller: cp}
}

func (b bridge) DialHook(next redis.DialHook) redis.DialHook { return next }

func (b bridge) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if w, ok := ctx.(*deadlineCtx); ok {
			w.process = next
			return b.caller.Process(ctx, cmd)
		}
		return b.caller.Process(context.WithValue(ctx, processKey{}, next), cmd)
	}
}

func (b bridge) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		pl := b.caller.Pipeline()
		_ = pl.BatchProcess(ctx, cmds...) // queues them; the error is Exec's
		if w, ok := ctx.(*deadlineCtx); ok {
			w.pipeline = next
		} else {
			ctx = context.WithValue(ctx, pipelineKey{}, next)
		}
		_, err := pl.Exec(ctx)
		return err
	}
}

// the hook interface is all bridge and callerTail must be.
var (
	_ redis.Hook = bridge{}
	_ redis.Hook = callerTail{}
)

// deadlineCtx is a worker's reusable context: it carries only a deadline,
// which go-redis turns into socket deadlines (the clients are expected to
// have ContextTimeoutEnabled), and the route of go-redis's log lines, and
// is never cancelled. Reusing it saves a context and a timer per call on
// the hot path. It also carries the rest of the worker's hook chain past
// the caller's hooks (see hooks.go), set by each call before it enters
// them: a worker makes one call at a time.
type deadlineCtx struct {
	deadline time.Time
	route    *Route
	process  redis.ProcessHook
	pipeline redis.ProcessPipelineHook
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *deadlineCtx) Done() <-chan struct{}       { return nil }
func (c *deadlineCtx) Err() error                  { return nil }
func (c *deadlineCtx) Value(key any) any {
	switch key.(type) {
	case routeKey:
		return c.route
	case processKey:
		return c.process
	case pipelineKey:
		return c.pipeline
	}
	return nil
}
