package conn

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/quorum"
	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// A node that refuses connections is tried now and then, not for every
// batch: the calls between two tries get its last refusal at once. Once it
// accepts connections again the next try gets through. The test judges
// the calls made (dials) and the errors seen, not time: a busy machine
// stretches every call.
func TestRefusingNodeIsTriedNowAndThen(t *testing.T) {
	server := redistest.StartT(t, 1, redistest.Options{})[0]
	dials, acquire := countedPipe(t, server)
	if _, err := acquire(); err != nil {
		t.Fatal(err)
	}

	if err := server.Kill(); err != nil {
		t.Fatal(err)
	}
	// Calls at full speed, each of which finds no connection. A call that
	// waited for the node would end in its timeout: each must end in the
	// refusal instead.
	before, start, calls := dials.Load(), time.Now(), 0
	for ; time.Since(start) < refusingFor; calls++ {
		if d, err := acquire(); err == nil || errors.Is(err, quorum.ErrTimeout) || isReply(err) {
			t.Fatalf("call %d to the killed node: %v after %v, want a refusal of its own, no timeout", calls, err, d)
		}
	}
	triedNowAndThen(t, "refuses connections", dials.Load()-before, calls, time.Since(start))

	if err := server.Restart(); err != nil {
		t.Fatal(err)
	}
	// The server accepts connections now: the first try after the
	// refusals' wait gets through. Calls before it get the last refusal.
	up, refusals := dials.Load(), 0
	for {
		_, err := acquire()
		if err == nil || isReply(err) {
			break
		}
		if errors.Is(err, quorum.ErrTimeout) {
			t.Fatalf("call %d after the node came back: %v, want its answer or the last refusal", refusals, err)
		}
		if refusals++; dials.Load()-up > 1 {
			t.Fatalf("%d dials after the node came back and still no answer: %v", dials.Load()-up, err)
		}
		time.Sleep(time.Millisecond)
	}
	if n := dials.Load() - up; n != 1 {
		t.Errorf("the node answered after %d dials once it was back, want 1", n)
	}
	t.Logf("the node answered after %d calls got the last refusal", refusals)
}

// A node that is a replica for a while answers READONLY on every new
// connection, which that reply ends (see keepsConn): it is tried now and
// then too, not for every batch.
func TestReplicaNodeIsTriedNowAndThen(t *testing.T) {
	server := redistest.StartT(t, 1, redistest.Options{})[0]
	dials, acquire := countedPipe(t, server)
	if _, err := acquire(); err != nil {
		t.Fatal(err)
	}
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	admin := server.NewClient()
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.ReplicaOf(t.Context(), "127.0.0.1", strconv.Itoa(port)).Err(); err != nil {
		t.Fatal(err)
	}
	before, start, calls := dials.Load(), time.Now(), 0
	for ; time.Since(start) < refusingFor; calls++ {
		if _, err := acquire(); err == nil || (isReply(err) && !redis.IsReadOnlyError(err)) {
			t.Fatalf("call %d to the replica: %v, want READONLY or a connection's error", calls, err)
		}
	}
	triedNowAndThen(t, "is a replica", dials.Load()-before, calls, time.Since(start))
	if err := admin.ReplicaOf(t.Context(), "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
}

// refusingFor is how long the tests call a node that refuses, at full
// speed: long enough for a dozen tries. It is no bound on anything.
const refusingFor = 600 * time.Millisecond

// triedNowAndThen fails t unless a node that refuses was tried (dialled)
// now and then over calls made at full speed in elapsed: again after a
// while, refuseFirst after the first refusal, then twice as long, up to
// refuseMax apart, and most calls got the last refusal without a try. The
// bound follows the calls' time (a slow machine's calls take longer and
// earn more tries, and are fewer), so only a try per call or near it, or
// none, fails it.
func triedNowAndThen(t *testing.T, what string, tried int64, calls int, elapsed time.Duration) {
	t.Helper()
	bound := 6 + 2*int64(elapsed/refuseMax)
	t.Logf("node %s: %d calls in %v, %d dials (at most %d)", what, calls, elapsed.Round(time.Millisecond), tried, bound)
	switch {
	case tried < 2:
		t.Fatalf("%d dials for %d calls in %v to a node that %s, want it tried again now and then", tried, calls, elapsed.Round(time.Millisecond), what)
	case tried > bound || 4*tried > int64(calls):
		t.Fatalf("%d dials for %d calls in %v to a node that %s, want a try now and then (at most %d, and most calls none)", tried, calls, elapsed.Round(time.Millisecond), what, bound)
	}
}

// The calls' timeout in countedPipe.
const refusingTimeout = 200 * time.Millisecond

// countedPipe is a pipe to server whose dials count in dials, and acquire
// makes one acquisition on it and waits for the reply.
func countedPipe(t *testing.T, server *redistest.Server) (dials *atomic.Int64, acquire func() (time.Duration, error)) {
	const timeout = refusingTimeout
	dials = new(atomic.Int64)
	client := redis.NewClient(&redis.Options{
		Addr: server.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, Protocol: 2, DisableIdentity: true,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { _ = client.Close() })
	p := NewPipe(client, timeout, Quiet, nil)
	t.Cleanup(p.Close)
	return dials, acquirer(t, p, timeout)
}

// acquirer makes one acquisition of key "k" with timeout on p and waits
// for its reply.
func acquirer(t *testing.T, p *Pipe, timeout time.Duration) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		t.Helper()
		done := make(chan error, 1)
		args := []any{"owner\x001\x00", 10000, "owner\x00"}
		start := time.Now()
		p.Start(&Call{Timeout: timeout, Script: scripts.Acquire, Keys: []string{"k"}, Expires: true,
			Cmd:   EvalSha(scripts.Acquire, []string{"k"}, args),
			Reply: ReplyFunc(func(cmd *redis.Cmd) { done <- cmd.Err() })}, false)
		err := <-done
		return time.Since(start), err
	}
}
