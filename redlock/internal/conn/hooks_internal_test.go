package conn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// detachingHook replaces every call's context with a fresh one, as a hook
// that does not derive its context from the call's would.
type detachingHook struct{}

func (detachingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (detachingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error { return next(context.Background(), cmd) }
}

func (detachingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(_ context.Context, cmds []redis.Cmder) error { return next(context.Background(), cmds) }
}

// TestHookThatDetachesIsRefused checks that a call whose context a hook of
// the caller's replaced fails with errHookContext, and that nothing of the
// pipe's goes out on the caller's own connections: the caller's pool stays
// empty.
func TestHookThatDetachesIsRefused(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	c.AddHook(detachingHook{})
	p := NewPipe(c, time.Second, Quiet, nil)
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := p.Client().Ping(ctx).Err(); !errors.Is(err, errHookContext) {
		t.Errorf("Ping through the pipe's client: %v, want %v", err, errHookContext)
	}
	_, err := p.Client().Pipelined(ctx, func(pl redis.Pipeliner) error {
		pl.Ping(ctx)
		pl.Ping(ctx)
		return nil
	})
	if !errors.Is(err, errHookContext) {
		t.Errorf("a pipeline through the pipe's client: %v, want %v", err, errHookContext)
	}
	if n := c.PoolStats().TotalConns; n != 0 {
		t.Errorf("the caller's pool has %d connections, want 0", n)
	}
}
