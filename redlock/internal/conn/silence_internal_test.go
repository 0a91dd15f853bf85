package conn

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/quorum"
)

// A node that answers nothing gets no acquisition once a batch to it has
// timed out, but for one probe a node timeout after each batch ended; a
// node that answers again gets them all again. A node that refuses
// connections is not silent.
func TestSilentNodeGetsProbesOnly(t *testing.T) {
	const timeout = 200 * time.Millisecond
	server := redistest.StartT(t, 1, redistest.Options{})[0]
	p := NewPipe(server.NewClient(), timeout, Quiet, nil)
	t.Cleanup(p.Close)
	q := &p.queues[QueueOf("k")]
	acquire := acquirer(t, p, timeout)
	// untilProbe waits for the time the next probe may go out.
	untilProbe := func() {
		time.Sleep(time.Until(time.Unix(0, q.w.probeAt.Load())) + time.Millisecond)
	}
	if _, err := acquire(); err != nil {
		t.Fatal(err)
	}

	if err := server.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Resume() })
	if d, err := acquire(); err == nil || errors.Is(err, ErrSilent) || d < timeout {
		t.Fatalf("first call to the paused node: %v after %v, want its timeout", err, d)
	}
	if d, err := acquire(); !errors.Is(err, ErrSilent) || d > timeout/2 {
		t.Fatalf("call after a batch timed out: %v after %v, want ErrSilent at once", err, d)
	}
	untilProbe()
	if d, err := acquire(); err == nil || errors.Is(err, ErrSilent) || d < timeout {
		t.Fatalf("probe: %v after %v, want it sent and timed out", err, d)
	}
	if _, err := acquire(); !errors.Is(err, ErrSilent) {
		t.Fatalf("call right after the probe: %v, want ErrSilent", err)
	}

	if err := server.Resume(); err != nil {
		t.Fatal(err)
	}
	untilProbe()
	for i := range 2 {
		if _, err := acquire(); err != nil && !isReply(err) {
			t.Fatalf("call %d after the node answers again: %v, want its answer", i, err)
		}
	}
	if s := q.w.silentSince.Load(); s != 0 {
		t.Fatal("the node answered, and is still taken for silent")
	}

	if err := server.Kill(); err != nil {
		t.Fatal(err)
	}
	// A call that waited for the node would end in its timeout: each must
	// end in the refusal instead (judged by the error, not by how long it
	// took, which a busy machine stretches).
	for i := range 100 {
		if d, err := acquire(); err == nil || errors.Is(err, quorum.ErrTimeout) || isReply(err) {
			t.Fatalf("call %d after the node was killed: %v after %v, want a refusal of its own, no timeout", i, err, d)
		}
	}
}

// isReply reports whether err is the server's reply.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
