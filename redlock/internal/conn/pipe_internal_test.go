package conn

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// A batch reaches the node in order even when the node has lost its scripts
// (a restart): otherwise a call answered NOSCRIPT is sent again after the
// rest of its batch, and an acquisition runs after the release that undoes
// it, leaving its key behind.
func TestBatchKeepsOrderAfterScriptLoss(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	ctx := context.Background()
	// The node knows the release script but not the acquire script.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptLoad(ctx, scripts.Release.Src).Err(); err != nil {
		t.Fatal(err)
	}
	p := NewPipe(c, time.Second, Quiet, nil)
	defer p.Close()

	prefix := "owner\x00"
	keys := []string{"k"}
	args := []any{prefix + "1\x00", 10000, prefix}
	// Both scripts answer 0 or more when they did their work (acquire:
	// granted; release: the hold was ours).
	votes := make(chan bool, 2)
	reply := ReplyFunc(func(cmd *redis.Cmd) {
		n, err := cmd.Int64()
		if err != nil {
			t.Errorf("call failed: %v", err)
		}
		votes <- err == nil && n >= 0
	})
	acquire := &Call{Timeout: time.Second, Script: scripts.Acquire, Keys: keys,
		Cmd: EvalSha(scripts.Acquire, keys, args), Reply: reply}
	undoArgs := []any{prefix, "", 0, "1"}
	release := &Call{Timeout: time.Second, Script: scripts.Release, Keys: keys,
		Cmd: EvalSha(scripts.Release, keys, undoArgs), Reply: reply}
	// One batch on a fresh connection, as a worker sends it.
	w := &worker{p: p}
	w.exec([]*Call{acquire, release})
	w.drop()
	if a, r := <-votes, <-votes; !a || !r {
		t.Fatalf("acquire voted %v, release %v; want both yes", a, r)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k = %d, %v after acquire then release: the release ran first", n, err)
	}
}
