package redlock

import (
	"github.com/quorumlock/redlock/redlock/internal/scripts"

	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/quorum"
)

// A batch reaches the node in order even when the node has lost its scripts
// (a restart): otherwise a call answered NOSCRIPT is sent again after the
// rest of its batch, and an acquisition runs after the release that undoes
// it, leaving its key behind.
func TestBatchKeepsOrderAfterScriptLoss(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0].(*redis.Client)
	ctx := context.Background()
	// The node knows the release script but not the acquire script.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ScriptLoad(ctx, scripts.Release.Src).Err(); err != nil {
		t.Fatal(err)
	}
	p := newPipe(c, time.Second, quietRoute)
	defer p.close()

	prefix := "owner\x00"
	keys := []string{"k"}
	args := []any{prefix + "1\x00", 10000, prefix}
	votes := make(chan quorum.Vote, 2)
	reply := func(_ int, v quorum.Vote, _ int64, err error) {
		if err != nil {
			t.Errorf("call failed: %v", err)
		}
		votes <- v
	}
	acquire := &nodeCall{timeout: time.Second, script: scripts.Acquire, keys: keys, args: args,
		cmd: evalSha(scripts.Acquire, keys, args), decode: decodeAcquire, reply: reply}
	undoArgs := []any{prefix, "", 0, "1"}
	release := &nodeCall{timeout: time.Second, script: scripts.Release, keys: keys, args: undoArgs,
		cmd: evalSha(scripts.Release, keys, undoArgs), decode: decodeCompare, reply: reply}
	// One batch on a fresh connection, as a worker sends it.
	w := &worker{p: p}
	w.exec([]*nodeCall{acquire, release})
	w.drop()
	if a, r := <-votes, <-votes; a != quorum.Yes || r != quorum.Yes {
		t.Fatalf("acquire voted %v, release %v; want both yes", a, r)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k = %d, %v after acquire then release: the release ran first", n, err)
	}
}
