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

// A caller sends its own call only when no earlier call waits in the queue:
// a release sent at once while its acquisition still waits would run
// first, and leave the acquisition's key behind.
func TestTrySendKeepsOrder(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0].(*redis.Client)
	p := newPipe(c, time.Second, quietRoute)
	defer p.close()
	// A queue of its own, with no worker: the test plays the worker.
	q := &queue{ch: make(chan *nodeCall, 1), w: worker{p: p}}
	ctx := context.Background()
	if err := q.w.open(ctx); err != nil {
		t.Fatal(err)
	}
	defer q.w.drop()

	prefix := "owner\x00"
	keys := []string{"k"}
	votes := make(chan quorum.Vote, 2)
	reply := func(_ int, v quorum.Vote, _ int64, err error) {
		if err != nil {
			t.Errorf("call failed: %v", err)
		}
		votes <- v
	}
	acqArgs := []any{prefix + "1\x00", 10000, prefix}
	acquire := &nodeCall{timeout: time.Second, script: scripts.Acquire, keys: keys, args: acqArgs,
		cmd: evalSha(scripts.Acquire, keys, acqArgs), decode: decodeAcquire, reply: reply}
	relArgs := []any{prefix, "", 0, "1"}
	release := &nodeCall{timeout: time.Second, script: scripts.Release, keys: keys, args: relArgs,
		cmd: evalSha(scripts.Release, keys, relArgs), decode: decodeCompare, reply: reply}

	// The acquisition is queued (as enqueue does), not sent yet.
	q.unsent.Add(1)
	q.ch <- acquire
	if q.trySend(release) {
		t.Fatal("the release was sent while its acquisition waited in the queue")
	}
	// The worker's turn, then the release's, in order.
	q.w.exec([]*nodeCall{<-q.ch})
	q.unsent.Add(-1)
	if !q.trySend(release) {
		t.Fatal("an idle queue did not let its caller send")
	}
	if a, r := <-votes, <-votes; a != quorum.Yes || r != quorum.Yes {
		t.Fatalf("acquire voted %v, release %v; want both yes", a, r)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k = %d, %v after acquire then release", n, err)
	}
}
