package conn

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// A caller sends its own call only when no earlier call waits in the queue:
// a release sent at once while its acquisition still waits would run
// first, and leave the acquisition's key behind.
func TestTrySendKeepsOrder(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	p := NewPipe(c, time.Second, Quiet, nil)
	defer p.Close()
	// A queue of its own, with no worker: the test plays the worker.
	q := &queue{ch: make(chan *Call, 1), w: worker{p: p}}
	ctx := context.Background()
	if err := q.w.open(ctx); err != nil {
		t.Fatal(err)
	}
	defer q.w.drop()

	prefix := "owner\x00"
	keys := []string{"k"}
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
	acqArgs := []any{prefix + "1\x00", 10000, prefix}
	acquire := &Call{Timeout: time.Second, Script: scripts.Acquire, Keys: keys,
		Cmd: EvalSha(scripts.Acquire, keys, acqArgs), Reply: reply}
	relArgs := []any{prefix, "", 0, "1"}
	release := &Call{Timeout: time.Second, Script: scripts.Release, Keys: keys,
		Cmd: EvalSha(scripts.Release, keys, relArgs), Reply: reply}

	// The acquisition is queued (as enqueue does), not sent yet.
	q.unsent.Add(1)
	q.ch <- acquire
	if q.trySend(release) {
		t.Fatal("the release was sent while its acquisition waited in the queue")
	}
	// The worker's turn, then the release's, in order.
	q.w.exec([]*Call{<-q.ch})
	q.unsent.Add(-1)
	if !q.trySend(release) {
		t.Fatal("an idle queue did not let its caller send")
	}
	if a, r := <-votes, <-votes; !a || !r {
		t.Fatalf("acquire voted %v, release %v; want both yes", a, r)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k = %d, %v after acquire then release", n, err)
	}
}
