package conn

import (
	"github.com/quorumlock/redlock/redlock/internal/scripts"

	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// A node that refuses connections is tried now and then, not for every
// batch: the calls between two tries get its last refusal at once. Once it
// accepts connections again it answers within about refuseMax.
func TestRefusingNodeIsTriedNowAndThen(t *testing.T) {
	server := redistest.StartT(t, 1, redistest.Options{})[0]
	dials, acquire := countedPipe(t, server)
	if _, err := acquire(); err != nil {
		t.Fatal(err)
	}

	if err := server.Kill(); err != nil {
		t.Fatal(err)
	}
	// Calls at full speed for 600ms, each of which finds no connection.
	before, calls := dials.Load(), 0
	for killed := time.Now(); time.Since(killed) < 600*time.Millisecond; calls++ {
		d, err := acquire()
		if err == nil || errors.Is(err, ErrSilent) || isReply(err) || d > refusingTimeout/2 {
			t.Fatalf("call %d to the killed node: %v after %v, want a fast error of its own", calls, err, d)
		}
	}
	triedNowAndThen(t, "refuses connections", dials.Load()-before, calls)

	if err := server.Restart(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	for {
		_, err := acquire()
		if err == nil || isReply(err) {
			break
		}
		if time.Since(up) > 5*time.Second {
			t.Fatalf("no answer 5s after the node came back: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	// At most refuseMax after the last refusal, and a dial and set-up.
	if d := time.Since(up); d > 250*time.Millisecond {
		t.Fatalf("the node answered %v after it came back, want within about %v", d.Round(time.Millisecond), refuseMax)
	} else {
		t.Logf("the node answered %v after it came back", d.Round(time.Millisecond))
	}
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
	before, calls := dials.Load(), 0
	for start := time.Now(); time.Since(start) < 600*time.Millisecond; calls++ {
		if _, err := acquire(); err == nil || (isReply(err) && !redis.IsReadOnlyError(err)) {
			t.Fatalf("call %d to the replica: %v, want READONLY or a connection's error", calls, err)
		}
	}
	triedNowAndThen(t, "is a replica", dials.Load()-before, calls)
	if err := admin.ReplicaOf(t.Context(), "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
}

// The calls' timeout in countedPipe.
const refusingTimeout = 200 * time.Millisecond

// triedNowAndThen fails t unless a node that refuses was tried (dialled)
// now and then in 600ms of calls at full speed: refuseFirst, then twice
// as long, ... up to refuseMax apart, about 15 times. The bound is
// generous against a slow machine, whose calls are fewer.
func triedNowAndThen(t *testing.T, what string, tried int64, calls int) {
	t.Helper()
	t.Logf("node %s: %d calls in 600ms, %d dials", what, calls, tried)
	if calls < 100 {
		t.Fatalf("only %d calls in 600ms: too few to tell", calls)
	}
	if tried > 40 {
		t.Fatalf("%d dials for %d calls to a node that %s, want a try now and then (about 15)", tried, calls, what)
	}
}

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
