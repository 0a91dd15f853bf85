package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// down asserts that a command through c fails within a short deadline.
func down(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("the server still answers through the forwarder")
	}
}

// getK asserts that GET k through c returns want.
func getK(t *testing.T, c *redis.Client, want string) {
	t.Helper()
	got, err := c.Get(t.Context(), "k").Result()
	if err != nil || got != want {
		t.Fatalf("GET k = %q, %v; want %q", got, err, want)
	}
}

// awaitK waits (up to 5s) until GET k on c returns want.
func awaitK(t *testing.T, c *redis.Client, want string) {
	t.Helper()
	if err := redistest.Eventually(t, 5*time.Second, func() error {
		got, err := c.Get(t.Context(), "k").Result()
		if err == nil && got != want {
			err = fmt.Errorf("GET k = %q, want %q", got, want)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestForwarderFaults checks each fault that SetFaults, Isolate and
// Disconnect play, and that healing undoes it.
func TestForwarderFaults(t *testing.T) {
	start := func(t *testing.T) (s *redistest.Server, f *redistest.Forwarder, c, direct *redis.Client) {
		t.Helper()
		s = redistest.StartT(t, 1, redistest.Options{})[0]
		f = redistest.ForwardT(t, s.Addr)
		c, direct = f.NewClient(), s.NewClient()
		t.Cleanup(func() { _ = c.Close(); _ = direct.Close() })
		if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		return s, f, c, direct
	}
	heal := func(t *testing.T, f *redistest.Forwarder) {
		t.Helper()
		if err := f.SetFaults(redistest.Faults{}); err != nil {
			t.Fatal(err)
		}
		if err := f.Reconnect(); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("blackhole", func(t *testing.T) {
		_, f, c, _ := start(t)
		if err := f.SetFaults(redistest.Faults{Blackhole: true}); err != nil {
			t.Fatal(err)
		}
		down(t, c)
		heal(t, f)
		getK(t, c, "v")
	})
	t.Run("dropped replies", func(t *testing.T) {
		_, f, c, direct := start(t)
		if err := f.SetFaults(redistest.Faults{DropReplies: true}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		if err := c.Set(ctx, "k", "w", 0).Err(); err == nil {
			t.Fatal("SET got a reply through a forwarder that drops replies")
		}
		// The command went through: the server applies it, though perhaps
		// a moment after the client gave up.
		awaitK(t, direct, "w")
		heal(t, f)
		getK(t, c, "w")
	})
	t.Run("reset", func(t *testing.T) {
		_, f, c, _ := start(t)
		if err := f.SetFaults(redistest.Faults{Reset: true}); err != nil {
			t.Fatal(err)
		}
		down(t, c)
		heal(t, f)
		getK(t, c, "v")
	})
	t.Run("request delay", func(t *testing.T) {
		// A delayed SET has not reached the server while the delay lasts;
		// the reply is on time once it has.
		_, f, c, direct := start(t)
		if err := f.SetFaults(redistest.Faults{RequestDelay: time.Minute}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Set(t.Context(), "k", "w", 0).Err() }()
		getK(t, direct, "v")
		// Healing lets the waiting request go at once.
		heal(t, f)
		if err := <-done; err != nil {
			t.Fatalf("SET after the delay was healed: %v", err)
		}
		getK(t, direct, "w")
	})
	t.Run("reply delay", func(t *testing.T) {
		// The SET takes effect at once; its reply comes later.
		_, f, c, direct := start(t)
		f.SetDelay(time.Minute)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- c.Set(ctx, "k", "w", 0).Err() }()
		awaitK(t, direct, "w")
		if err := <-done; err == nil {
			t.Fatal("SET whose reply is a minute late returned within a second")
		}
		if got := f.Faults().ReplyDelay; got != time.Minute {
			t.Fatalf("Faults().ReplyDelay = %v, want 1m", got)
		}
	})
	t.Run("latency both ways", func(t *testing.T) {
		_, f, c, _ := start(t)
		const latency = 50 * time.Millisecond
		if err := f.SetFaults(redistest.Faults{RequestDelay: latency, ReplyDelay: latency, Jitter: latency / 2}); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		getK(t, c, "v")
		// A round trip crosses the forwarder twice, each way at least
		// latency - jitter late.
		if d := time.Since(began); d < latency {
			t.Fatalf("GET took %v through %v ± %v each way", d, latency, latency/2)
		}
		heal(t, f)
		getK(t, c, "v")
	})
	t.Run("isolate", func(t *testing.T) {
		_, f, c, _ := start(t)
		f.Isolate()
		down(t, c)
		var opErr *net.OpError
		if conn, err := net.Dial("tcp", f.Addr); !errors.As(err, &opErr) {
			if conn != nil {
				_ = conn.Close()
			}
			t.Fatalf("dialling an isolated forwarder: %v, want a refusal", err)
		}
		heal(t, f)
		getK(t, c, "v")
	})
	t.Run("disconnect", func(t *testing.T) {
		_, f, _, _ := start(t)
		conn, err := net.Dial("tcp", f.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if n, err := conn.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
			t.Fatalf("PING = %q, %v", buf[:n], err)
		}
		f.Disconnect()
		if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if n, err := conn.Read(buf); err == nil {
			t.Fatalf("read %q from a connection the forwarder ended", buf[:n])
		}
		c := f.NewClient()
		t.Cleanup(func() { _ = c.Close() })
		getK(t, c, "v")
	})
	t.Run("negative delay", func(t *testing.T) {
		_, f, _, _ := start(t)
		if err := f.SetFaults(redistest.Faults{Jitter: -time.Millisecond}); err == nil {
			t.Fatal("SetFaults took a negative jitter")
		}
		if got := f.Faults(); got != (redistest.Faults{}) {
			t.Fatalf("a refused SetFaults left %+v", got)
		}
	})
}

// TestForwarderAbandonedConnections: a storm of connections whose clients
// gave up before sending anything (clients that time out and reconnect on
// a busy machine) costs the server nothing, and a client behind the storm
// is served.
func TestForwarderAbandonedConnections(t *testing.T) {
	s := redistest.StartT(t, 1, redistest.Options{})[0]
	f := redistest.ForwardT(t, s.Addr)
	direct := s.NewClient()
	t.Cleanup(func() { _ = direct.Close() })
	before := redistest.ConnectionsReceived(t, direct)

	const storm = 300
	for range storm {
		conn, err := net.Dial("tcp", f.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Accepted after the storm: once it is answered, the forwarder has
	// taken every connection of the storm.
	c := f.NewClient()
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if got := redistest.ConnectionsReceived(t, direct) - before; got != 1 {
		t.Fatalf("the server received %d connections for %d abandoned ones and one client; want 1", got, storm)
	}
}
