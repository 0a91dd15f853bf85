package conn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// clients counts the server's client connections other than the caller's.
func clients(t *testing.T, c *redis.Client) int {
	t.Helper()
	list, err := c.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, "\n") - 1
}

// A retired pipe sends nothing it had not sent: a call queued or made
// after the retirement, inline or not, is answered ErrDemoted (which
// matches ErrShed) without reaching the server, and its connections are
// closed. Restored, it sends again, on a new connection.
func TestRetiredPipeSendsNothing(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	p := NewPipe(c, time.Second, Quiet, nil)
	t.Cleanup(p.Close)
	got := make(chan *redis.Cmd, 1)
	send := func(key string, inline bool) error {
		p.Start(guardedAcquire(key, 0, got), inline)
		return (<-got).Err()
	}
	if err := send("before", false); err != nil {
		t.Fatal(err)
	}
	if n := clients(t, c); n != 1 {
		t.Fatalf("%d connections of the pipe's worker, want 1", n)
	}
	sent := calls(t, c, "evalsha")
	p.retire()
	// The server sees the close when it reads the socket: await it.
	err := redistest.Eventually(t, 10*time.Second, func() error {
		if n := clients(t, c); n != 0 {
			return fmt.Errorf("%d connections left open by a retired pipe, want none", n)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	for _, inline := range []bool{false, true} {
		if err := send("after", inline); !errors.Is(err, ErrDemoted) || !errors.Is(err, ErrShed) {
			t.Errorf("a call on a retired pipe (inline %v): %v, want ErrDemoted", inline, err)
		}
	}
	if n := calls(t, c, "evalsha"); n != sent {
		t.Errorf("the server ran %d calls after the retirement, want none", n-sent)
	}
	p.restore()
	if err := send("after", true); err != nil {
		t.Errorf("a call on a restored pipe: %v", err)
	}
	if n, err := c.Exists(context.Background(), "before", "after").Result(); err != nil || n != 2 {
		t.Errorf("keys %d, %v: want both acquisitions held", n, err)
	}
}

// A Sentinel group's pipe refuses a connection to a server that says it
// is a replica, even one that takes writes (replica-read-only no): it
// would vote for a group whose master it is not.
func TestSentinelPipeRefusesAReplica(t *testing.T) {
	master := redistest.StartT(t, 1, redistest.Options{})[0]
	replica := redistest.StartReplicaT(t, master, redistest.Options{Args: []string{"--replica-read-only", "no"}})
	rc := replica.NewClient()
	t.Cleanup(func() { _ = rc.Close() })
	p := NewPipe(rc, time.Second, Quiet, nil)
	p.role.only = true
	t.Cleanup(p.Close)
	got := make(chan *redis.Cmd, 1)
	p.Start(guardedAcquire("k", 0, got), false)
	if err := (<-got).Err(); !errors.Is(err, errNotMaster) {
		t.Errorf("an acquisition on a replica: %v, want it refused as not a master", err)
	}
	if n, err := rc.Exists(context.Background(), "k").Result(); err != nil || n != 0 {
		t.Errorf("keys on the replica: %d, %v; want none", n, err)
	}
}

// keyOf returns the n-th key of queue q.
func keyOf(q, n int) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("key-%d", i); QueueOf(k) == q {
			if n == 0 {
				return k
			}
			n--
		}
	}
}

// A call made while the retirement waits for another queue's batch, on a
// queue whose connection is still open, is not sent there either: the
// caller that would send it itself (inline) sees the retirement first.
func TestRetiringPipeSendsNothingInline(t *testing.T) {
	c := redistest.ClientsT(t, redistest.StartT(t, 1, redistest.Options{}))[0]
	p := NewPipe(c, time.Second, Quiet, nil)
	t.Cleanup(p.Close)
	got := make(chan *redis.Cmd, 1)
	send := func(key string) error {
		p.Start(guardedAcquire(key, 0, got), true)
		return (<-got).Err()
	}
	if err := send(keyOf(1, 0)); err != nil {
		t.Fatal(err)
	}
	letGo := p.Hold(keyOf(0, 0))
	retired := make(chan struct{})
	go func() {
		defer close(retired)
		p.retire()
	}()
	err := redistest.Eventually(t, 10*time.Second, func() error {
		if !p.role.retired.Load() {
			return errors.New("the pipe is not retiring")
		}
		return nil
	})
	if err != nil {
		letGo()
		t.Fatal(err)
	}
	sent := calls(t, c, "evalsha")
	if err := send(keyOf(1, 1)); !errors.Is(err, ErrDemoted) {
		t.Errorf("an inline call on a retiring pipe: %v, want ErrDemoted", err)
	}
	letGo()
	<-retired
	if n := calls(t, c, "evalsha"); n != sent {
		t.Errorf("the server ran %d calls after the retirement began, want none", n-sent)
	}
}
