package redistest_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestMain(m *testing.M) {
	var addrs []string
	redistest.Main(m, 0, &addrs)
}

// runID returns the run_id of the server that answers on c.
func runID(t *testing.T, c *redis.Client) string {
	t.Helper()
	info, err := c.Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if id, ok := strings.CutPrefix(line, "run_id:"); ok {
			return id
		}
	}
	t.Fatalf("no run_id in INFO server:\n%s", info)
	return ""
}

// TestForwarderMoveTo moves one go-redis connection between two servers
// and back: each command after a move is answered by the other server, on
// the same connection, set up as the client set it up (database, name).
func TestForwarderMoveTo(t *testing.T) {
	for _, protocol := range []int{2, 3} {
		t.Run(map[int]string{2: "resp2", 3: "resp3"}[protocol], func(t *testing.T) {
			servers := redistest.StartT(t, 2, redistest.Options{})
			ids := make([]string, 2)
			for i, s := range servers {
				direct := redis.NewClient(&redis.Options{Addr: s.Addr, DB: 1})
				t.Cleanup(func() { _ = direct.Close() })
				if err := direct.Set(t.Context(), "k", s.Addr, 0).Err(); err != nil {
					t.Fatal(err)
				}
				ids[i] = runID(t, direct)
			}
			f := redistest.ForwardT(t, servers[0].Addr)
			var dials atomic.Int32
			c := redis.NewClient(&redis.Options{
				Addr: f.Addr, DB: 1, ClientName: "mover", Protocol: protocol,
				PoolSize: 1, MaxRetries: -1,
				Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
					dials.Add(1)
					var d net.Dialer
					return d.DialContext(ctx, network, addr)
				},
			})
			t.Cleanup(func() { _ = c.Close() })

			for step, i := range []int{0, 1, 0, 1} {
				if step > 0 {
					f.MoveTo(servers[i].Addr)
				}
				if got := f.Target(); got != servers[i].Addr {
					t.Fatalf("step %d: Target() = %s, want %s", step, got, servers[i].Addr)
				}
				if got, err := c.Get(t.Context(), "k").Result(); err != nil || got != servers[i].Addr {
					t.Fatalf("step %d: GET k = %q, %v; want %q (database 1 of the server moved to)", step, got, err, servers[i].Addr)
				}
				if got := runID(t, c); got != ids[i] {
					t.Fatalf("step %d: run_id %s, want %s's %s", step, got, servers[i].Addr, ids[i])
				}
				if got, err := c.ClientGetName(t.Context()).Result(); err != nil || got != "mover" {
					t.Fatalf("step %d: CLIENT GETNAME = %q, %v; want the name the client set", step, got, err)
				}
			}
			if n := dials.Load(); n != 1 {
				t.Fatalf("the client dialled %d connections, want 1: the moves were not unseen", n)
			}
		})
	}
}

// TestForwarderMoveToInFlight moves a connection while a command sent
// before the move is still running on the old server: the command sent
// after it waits, and the client gets the old server's reply first.
func TestForwarderMoveToInFlight(t *testing.T) {
	servers := redistest.StartT(t, 2, redistest.Options{})
	for _, s := range servers {
		c := s.NewClient()
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Set(t.Context(), "k", s.Addr, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	f := redistest.ForwardT(t, servers[0].Addr)
	conn, err := net.Dial("tcp", f.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	r := bufio.NewReader(conn)
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// BLPOP blocks on servers[0] for 300ms, then answers with a null.
	if _, err := conn.Write([]byte("*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$3\r\n0.3\r\n")); err != nil {
		t.Fatal(err)
	}
	// The forwarder has read the BLPOP once servers[0] shows it blocked.
	c0 := servers[0].NewClient()
	t.Cleanup(func() { _ = c0.Close() })
	for {
		info, err := c0.Info(t.Context(), "clients").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "blocked_clients:1") {
			break
		}
	}
	f.MoveTo(servers[1].Addr)
	if _, err := conn.Write([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")); err != nil {
		t.Fatal(err)
	}
	want := []string{"*-1", "$" + strconv.Itoa(len(servers[1].Addr)), servers[1].Addr}
	for i, w := range want {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading reply line %d: %v", i, err)
		}
		if got := strings.TrimSuffix(line, "\r\n"); got != w {
			t.Fatalf("reply line %d = %q, want %q (replies %q)", i, got, w, want)
		}
	}
}

// TestForwarderMoveToNowhere moves a connection to an address nobody
// listens on: the connection ends at its next command, as a proxy that
// cannot reach its backend ends it.
func TestForwarderMoveToNowhere(t *testing.T) {
	servers := redistest.StartT(t, 1, redistest.Options{})
	f := redistest.ForwardT(t, servers[0].Addr)
	c := f.NewClient()
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	f.MoveTo(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err := c.Ping(t.Context()).Err(); err == nil {
		t.Fatal("PING through a forwarder moved to nowhere succeeded")
	}
	f.MoveTo(servers[0].Addr)
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("PING after moving back: %v", err)
	}
}

// TestForwarderMoveToUnderLoad moves the connections of a busy client back
// and forth between two servers that hold the same keys: every reply, of
// single commands and of pipelines, is still the reply to its own command,
// and both servers answer.
func TestForwarderMoveToUnderLoad(t *testing.T) {
	const keys = 50
	servers := redistest.StartT(t, 2, redistest.Options{})
	for n, s := range servers {
		c := s.NewClient()
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Set(t.Context(), "who", n, 0).Err(); err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			if err := c.Set(t.Context(), "k"+strconv.Itoa(i), i, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	f := redistest.ForwardT(t, servers[0].Addr)
	c := redis.NewClient(&redis.Options{Addr: f.Addr, PoolSize: 4, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })

	var wg sync.WaitGroup
	var seen [2]atomic.Int32 // answers to GET who from each server
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for op := range 200 {
				i := (g*31 + op*7) % keys
				switch {
				case op%10 == 0:
					f.MoveTo(servers[(g+op/10)%2].Addr)
					who, err := c.Get(t.Context(), "who").Int()
					if err != nil {
						errs <- fmt.Errorf("GET who: %w", err)
						return
					}
					seen[who].Add(1)
				case op%5 == 0:
					cmds, err := c.Pipelined(t.Context(), func(p redis.Pipeliner) error {
						for j := range 10 {
							p.Get(t.Context(), "k"+strconv.Itoa((i+j)%keys))
						}
						return nil
					})
					if err != nil {
						errs <- err
						return
					}
					for j, cmd := range cmds {
						if got := cmd.(*redis.StringCmd).Val(); got != strconv.Itoa((i+j)%keys) {
							errs <- fmt.Errorf("pipelined GET k%d = %q", (i+j)%keys, got)
							return
						}
					}
				default:
					got, err := c.Get(t.Context(), "k"+strconv.Itoa(i)).Result()
					if err != nil || got != strconv.Itoa(i) {
						errs <- fmt.Errorf("GET k%d = %q, %v", i, got, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if seen[0].Load() == 0 || seen[1].Load() == 0 {
		t.Errorf("GET who answered by server 0 %d times, by server 1 %d times: want both", seen[0].Load(), seen[1].Load())
	}
}
