package redlock_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// comingBack starts three servers and a Locker over them (node timeout
// 200ms) that reaches node 0 through a wire, with its connections made.
func comingBack(t *testing.T) ([]*redistest.Server, *wire, *redlock.Locker) {
	t.Helper()
	servers := redistest.StartT(t, 3, redistest.Options{})
	back := newWire(t, servers[0])
	direct := redistest.ClientsT(t, servers)
	l := newLocker(t, []*redis.Client{back.Client, direct[1], direct[2]},
		redlock.WithNodeTimeout(200*time.Millisecond))
	if err := mustObtain(t, l, "warm").Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	return servers, back, l
}

// A node that comes back after a short outage votes again at once.
// go-redis's pools stop dialling after as many failed dials as the pool has
// room for, and then probe the server once a second: with room for only
// four connections (one per worker, as the pools once had), a node that
// restarted just after a probe stayed out of every vote for about a second
// more (879ms here): its first attempt after the restart did not even dial
// it. The lock's pools have room for 1024 (see conn.ClientOptions), and the
// workers' failed dials do not count in them (see
// TestNodeBackAfterLongOutageVotesAtOnce). A worker tries a node that
// refused it again at most 50ms later: the first attempt more than that
// after the last refusal dials.
func TestNodeBackVotesAtOnce(t *testing.T) {
	servers, back, l := comingBack(t)
	if err := servers[2].Kill(); err != nil { // a majority now needs node 0
		t.Fatal(err)
	}
	if err := servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	// Many attempts, each of which finds node 0's connection gone (its
	// worker dials it now and then).
	for range 50 {
		if _, err := l.TryObtain(t.Context(), "k"); err == nil {
			t.Fatal("obtained with two of three nodes down")
		}
	}
	t.Logf("%d dials to node 0 in 50 attempts", back.dials.Load()-1)
	// Wait for a dial that no call of ours made (a pool's probe, if there
	// is one), then bring the node back at once.
	before := back.dials.Load()
	dialled := func() bool { return back.dials.Load() > before }
	if poll(t, 2*time.Second, dialled) {
		t.Log("a probe dialled node 0")
	}
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	// The first attempt dials node 0: a pool that has given up dialling
	// would not, until its next probe.
	dials := back.dials.Load()
	lock, err := l.TryObtain(t.Context(), "k")
	if back.dials.Load() == dials {
		t.Fatalf("the first attempt after node 0 came back did not dial it (%v): its pool has given up dialling", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for err != nil {
		if time.Now().After(deadline) {
			t.Fatalf("no lock 5s after node 0 came back: %v", err)
		}
		lock, err = l.TryObtain(t.Context(), "k")
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A node that restarted between two calls fails neither: the lock's
// connection to it, idle since the last call and closed by the old
// process, is replaced before anything is written on it. Nothing of the
// next call would have reached the old process, but a call once written
// cannot be sent again (it may have run), so only a look before writing
// can spare it. Without that look the first call after the restart failed
// with EOF, and in single-node mode so did the Obtain. An idle connection
// that is still open is kept.
func TestNodeRestartBetweenCallsFailsNone(t *testing.T) {
	servers := redistest.StartT(t, 1, redistest.Options{})
	clients := redistest.ClientsT(t, servers)
	l := newLocker(t, clients)
	// The connections the server has accepted: the Locker's, and the one
	// of clients, which the Locker never uses and this count reuses.
	connections := func() float64 {
		return serverInfo(t, clients, "stats", "total_connections_received")[0]
	}
	for _, key := range []string{"a", "b", "c", "d"} { // a key on every queue
		if err := mustObtain(t, l, key).Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	before := connections()
	time.Sleep(20 * time.Millisecond) // idle: the next calls look at their connections
	for _, key := range []string{"a", "b", "c", "d"} {
		if err := mustObtain(t, l, key).Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if after := connections(); after != before {
		t.Fatalf("idle open connections replaced: %v connections received before, %v after, want none new", before, after)
	}
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b", "c", "d"} {
		lock, err := l.TryObtain(t.Context(), key)
		if err != nil {
			t.Fatalf("first TryObtain of %q after the node restarted: %v", key, err)
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// A node back from a long outage votes again as soon as it accepts
// connections. A go-redis pool that has counted as many failed dials as it
// has room for stops dialling and probes the server once a second; a long
// outage under load used to trip the pool of node 0's connections, and a
// node that restarted just after a probe stayed out of every vote for about
// a second more (987ms to 997ms here). The workers dial for themselves, and
// a worker whose node refuses connections tries it again after 5ms, then
// twice as long after each refusal, up to 50ms (see conn.refused): the
// node votes again within about 50ms (2ms to 4ms with a dial per call,
// 32ms with the backoff). Node 1 is down when node 0 comes back, so a lock
// needs node 0.
func TestNodeBackAfterLongOutageVotesAtOnce(t *testing.T) {
	servers, back, l := comingBack(t)
	if err := servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	// The outage: attempts at full speed for 1.5s (past a go-redis pool's
	// probe), each of which finds node 0's connection gone (nodes 1 and 2
	// grant them).
	attempts, start := 0, back.dials.Load()
	for began := time.Now(); time.Since(began) < 1500*time.Millisecond; attempts++ {
		lock, err := l.TryObtain(t.Context(), "k")
		if err != nil {
			t.Fatalf("attempt %d with node 0 down: %v", attempts, err)
		}
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	dialled := back.dials.Load() - start
	t.Logf("outage: %d attempts, %d dials to node 0", attempts, dialled)
	// A dead node costs a dial now and then: about 30 in 1.5s on the
	// key's queue (an attempt and its release use the same one).
	if dialled > 100 {
		t.Errorf("%d dials to node 0 in %d attempts over 1.5s, want a try now and then (about 30)", dialled, attempts)
	}
	if err := servers[1].Kill(); err != nil { // a majority now needs node 0
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() { restarted <- servers[0].Restart() }()
	// The moment node 0 accepts connections again.
	var up time.Time
	for up.IsZero() {
		c, err := net.DialTimeout("tcp", servers[0].Addr, 100*time.Millisecond)
		if err == nil {
			up = time.Now()
			_ = c.Close()
		} else {
			time.Sleep(time.Millisecond) // pace the dials
		}
		select {
		case err := <-restarted:
			if err != nil {
				t.Fatal(err)
			}
			restarted <- nil
		default:
		}
	}
	var tries int
	for {
		tries++
		lock, err := l.TryObtain(t.Context(), "k")
		if err == nil {
			d := time.Since(up)
			t.Logf("node 0 voted %v after it accepted connections (attempt %d)", d.Round(time.Millisecond), tries)
			if err := lock.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			if d > 500*time.Millisecond {
				t.Errorf("node 0 voted %v after it accepted connections, want well under 500ms", d.Round(time.Millisecond))
			}
			break
		}
		if time.Since(up) > 5*time.Second {
			t.Fatalf("no lock 5s after node 0 accepted connections: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // pace the attempts
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
}

// A node that answers READONLY (a replica, for good or until a failover
// promotes it) is tried again at most every 50 ms per queue, as a node that
// refuses connections: READONLY ends the connection, and the replica's
// batches that write nothing (the release of a key it does not hold)
// succeed and used to end the wait between tries, so nearly every
// acquisition cost a new connection (118 a second from one goroutine). And
// once promoted it votes again.
func TestReplicaNodeTriedNowAndThen(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{})
	direct := redistest.ClientsT(t, servers)
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// A replica of an address where nothing listens: it refuses writes.
	if err := direct[2].ReplicaOf(t.Context(), "127.0.0.1", strconv.Itoa(port)).Err(); err != nil {
		t.Fatal(err)
	}
	l := newLocker(t, redistest.ClientsT(t, servers), testOpts...)
	before := redistest.ConnectionsReceived(t, direct[2])
	start, pairs := time.Now(), 0
	for time.Since(start) < time.Second {
		lock, err := l.TryObtain(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		pairs++
		if err := lock.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	// Two queues per node, each trying at most every 50 ms, and a margin.
	opened := redistest.ConnectionsReceived(t, direct[2]) - before
	bound := 2 * (int(elapsed/(50*time.Millisecond)) + 5)
	t.Logf("%d connections to the replica in %d pairs over %v", opened, pairs, elapsed.Round(time.Millisecond))
	if opened > bound {
		t.Errorf("%d connections to a replica in %v (%d pairs), want at most %d", opened, elapsed.Round(time.Millisecond), pairs, bound)
	}
	// Promoted, it votes again.
	if err := direct[2].ReplicaOf(t.Context(), "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if !poll(t, 5*time.Second, func() bool {
		lock, err := l.TryObtain(t.Context(), "promoted")
		if err != nil {
			return false
		}
		defer func() {
			if err := lock.Release(t.Context()); err != nil {
				t.Error(err)
			}
		}()
		v, err := direct[2].Get(t.Context(), "promoted").Result()
		return err == nil && v != ""
	}) {
		t.Fatal("the promoted node never granted")
	}
}
