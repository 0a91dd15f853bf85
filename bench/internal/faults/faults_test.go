package faults_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/bench/internal/faults"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers every line with the same line until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// roundTrip dials addr, sends a line and returns how long the echo took.
func roundTrip(addr string) (time.Duration, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return 0, err
	}
	if line != "ping\n" {
		return 0, errors.New("bad echo " + line)
	}
	return time.Since(start), nil
}

func TestProxy(t *testing.T) {
	p, err := faults.Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})

	if _, err := roundTrip(p.Addr); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	const delay = 40 * time.Millisecond
	if err := p.SetLatency(delay); err != nil {
		t.Fatal(err)
	}
	if d, err := roundTrip(p.Addr); err != nil || d < delay {
		t.Errorf("with latency %v: round trip %v, %v", delay, d, err)
	}
	if err := p.SetLatency(0); err != nil {
		t.Fatal(err)
	}
	if d, err := roundTrip(p.Addr); err != nil || d >= delay {
		t.Errorf("latency removed: round trip %v, %v", d, err)
	}
	if err := p.SetLatency(1500 * time.Microsecond); err == nil {
		t.Error("SetLatency accepted a fraction of a millisecond")
	}

	p.Down()
	if _, err := roundTrip(p.Addr); err == nil {
		t.Error("node down, yet the round trip worked")
	}
	if err := p.Up(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(p.Addr); err != nil {
		t.Errorf("after Up: %v", err)
	}
}
