package redlock_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// lockConnName names the Locker's connections in these tests, so that the
// test can tell them apart from its own in CLIENT LIST: the lock's clients
// take the name from the caller's options.
const lockConnName = "lock-under-test"

// lockConns returns the CLIENT IDs of the Locker's connections on the
// server that c reaches.
func lockConns(t *testing.T, c *redis.Client) []string {
	t.Helper()
	list, err := c.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for line := range strings.Lines(list) {
		var id, name string
		for f := range strings.FieldsSeq(line) {
			switch k, v, _ := strings.Cut(f, "="); k {
			case "id":
				id = v
			case "name":
				name = v
			}
		}
		if name == lockConnName {
			ids = append(ids, id)
		}
	}
	return ids
}

// namedClient is a client like the test helper's for addr, whose
// connections (and so the Locker's) carry lockConnName; closed at cleanup.
func namedClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, Protocol: 2, DisableIdentity: true, ClientName: lockConnName})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// badState is a way for node 0 to fail every call for a while, with an
// error that leaves the connection unfit for the next call, or says the
// server is not a usable master now.
type badState struct {
	name string
	// args are the servers' extra arguments.
	args []string
	// forward reaches node 0 through a forwarder.
	forward bool
	// enter puts node 0 in the state and returns the function that ends it.
	enter func(t *testing.T, c *cluster, fwd *redistest.Forwarder) (leave func())
	// want is in node 0's error while it is in the state ("": any error).
	want string
	// readable is true when the state fails writes only: a lock taken
	// then must miss node 0.
	readable bool
	// restarts is true when the state ends with a new server process: its
	// connection ids start over, so the old connection's id says nothing.
	restarts bool
}

// Each error that leaves a node's connection unfit, or says the server is
// not a usable master right now, costs the node the calls that got it and
// no more: the key's worker replaces the connection, and once the state
// ends the node votes again for that very key, on the same Locker. A worker
// that kept the connection lost the node for good where go-redis marks the
// connection bad (READONLY, I/O errors, a reply that makes no sense); where
// it does not (LOADING, MASTERDOWN), the worker must still replace it, so
// the old connection must be gone from the server.
func TestNodeVotesAgainAfterBadConnection(t *testing.T) {
	for _, tc := range []badState{
		{name: "READONLY", enter: enterReadOnly, want: "READONLY", readable: true},
		{name: "LOADING", args: []string{"--enable-debug-command", "yes"}, enter: enterLoading, want: "LOADING"},
		{name: "MASTERDOWN", enter: enterMasterDown, want: "MASTERDOWN"},
		{name: "killed and restarted", enter: enterKilled, restarts: true},
		{name: "garbage reply", forward: true, enter: enterGarbage, want: "can't parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers := redistest.StartT(t, 3, redistest.Options{Args: tc.args})
			c := &cluster{servers: servers, clients: redistest.ClientsT(t, servers)}
			addrs := []string{servers[0].Addr, servers[1].Addr, servers[2].Addr}
			var fwd *redistest.Forwarder
			if tc.forward {
				fwd = holder(t, servers[0])
				addrs[0] = fwd.Addr
			}
			var clients []*redis.Client
			for _, a := range addrs {
				clients = append(clients, namedClient(t, a))
			}
			l := newLocker(t, clients)
			ctx := t.Context()
			const key = "badconn"

			lock := mustObtain(t, l, key) // the key's worker on node 0 now holds a connection
			if err := lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// Inspect waits for every node, behind the release's call
			// (Release returns at a majority): a release that reached node
			// 0 only once it was in the state would leave the key there.
			if _, err := l.Inspect(ctx, key); err != nil {
				t.Fatal(err)
			}
			if v := c.value(t, 0, key); v != "" {
				t.Fatalf("key left on node 0 after its release: %q", v)
			}
			before := lockConns(t, c.clients[0])
			if len(before) != 1 {
				t.Fatalf("the Locker has connections %v on node 0; want one, the key's worker's", before)
			}

			leave := tc.enter(t, c, fwd)
			// Inspect's call, like every call for the key, goes through
			// the key's worker.
			if tc.readable {
				lock := mustObtain(t, l, key)
				if _, err := l.Inspect(ctx, key); err != nil { // behind the acquisition's last call
					t.Fatal(err)
				}
				if n := c.holders(t, key, lock.Token()); n != 2 {
					t.Fatalf("lock held on %d nodes while node 0 answers %s to writes; want 2", n, tc.want)
				}
				if err := lock.Release(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				st, err := l.Inspect(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if e := st.Nodes[0].Err; e == nil || !strings.Contains(e.Error(), tc.want) {
					t.Fatalf("node 0 in Inspect while in the state: %v; want an error with %q", e, tc.want)
				}
			}
			leave()

			votesAgain(t, c, l, 0, key)
			if after := lockConns(t, c.clients[0]); !tc.restarts && slices.Contains(after, before[0]) {
				t.Fatalf("node 0 votes again on the connection (id %s) that got %s: it was kept, not replaced (connections now %v)",
					before[0], tc.want, after)
			}
		})
	}
}

// enterReadOnly makes node 0 a replica of a fresh server, once it is in
// sync (until then it answers LOADING); leave makes it a master again.
func enterReadOnly(t *testing.T, c *cluster, _ *redistest.Forwarder) func() {
	t.Helper()
	// No wait for more replicas before the full sync.
	primary := redistest.StartT(t, 1, redistest.Options{Args: []string{"--repl-diskless-sync-delay", "0"}})[0]
	makeSyncedReplica(t, c, primary.Addr)
	return func() { replicaOfNoOne(t, c) }
}

// enterMasterDown makes node 0 a replica, with replica-serve-stale-data
// off, of a master that never answers; leave makes it a master again.
func enterMasterDown(t *testing.T, c *cluster, _ *redistest.Forwarder) func() {
	t.Helper()
	ctx := t.Context()
	// A listener that never answers, rather than a free port: a port left
	// free could be taken by another server before the test ends.
	dead := redistest.HangT(t)
	if err := c.clients[0].ConfigSet(ctx, "replica-serve-stale-data", "no").Err(); err != nil {
		t.Fatal(err)
	}
	makeReplica(t, c, dead.Addr)
	if err := c.clients[0].Get(ctx, "any").Err(); err == nil || !strings.HasPrefix(err.Error(), "MASTERDOWN") {
		t.Fatalf("node 0 as a replica of a dead master: GET gave %v; want MASTERDOWN", err)
	}
	return func() { replicaOfNoOne(t, c) }
}

// makeReplica makes node 0 a replica of the server at addr.
func makeReplica(t *testing.T, c *cluster, addr string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.clients[0].Do(t.Context(), "replicaof", host, port).Err(); err != nil {
		t.Fatal(err)
	}
}

// makeSyncedReplica is makeReplica, then waits until node 0 has synced:
// until then it answers LOADING, not READONLY.
func makeSyncedReplica(t *testing.T, c *cluster, addr string) {
	t.Helper()
	makeReplica(t, c, addr)
	if err := redistest.Eventually(t, 10*time.Second, func() error {
		info, err := c.clients[0].Info(t.Context(), "replication").Result()
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			err = errors.New("replica not in sync")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// replicaOfNoOne makes node 0 a master again.
func replicaOfNoOne(t *testing.T, c *cluster) {
	t.Helper()
	if err := c.clients[0].Do(t.Context(), "replicaof", "no", "one").Err(); err != nil {
		t.Fatal(err)
	}
}

// enterLoading has node 0 reload its dataset (DEBUG RELOAD), slowed down
// so that it loads for seconds, during which it answers LOADING on the
// connections it already had; leave waits for the reload to end.
func enterLoading(t *testing.T, c *cluster, _ *redistest.Forwarder) func() {
	t.Helper()
	ctx := t.Context()
	admin := c.clients[0]
	for _, cmd := range [][]any{
		{"debug", "populate", 2000},
		// 1 ms per key loaded; and answer clients every KB of it.
		{"config", "set", "key-load-delay", 1000},
		{"config", "set", "loading-process-events-interval-bytes", 1024},
	} {
		if err := admin.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	// DEBUG RELOAD answers once the load is over: a client of its own,
	// with time to wait for it.
	slow := redis.NewClient(&redis.Options{Addr: c.servers[0].Addr, ReadTimeout: time.Minute, MaxRetries: -1,
		Protocol: 2, DisableIdentity: true})
	reloaded := make(chan error, 1)
	go func() { reloaded <- slow.Do(context.Background(), "debug", "reload").Err() }()
	wait := func() {
		t.Helper()
		err := <-reloaded
		reloaded <- err // for the cleanup
		if cerr := slow.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("DEBUG RELOAD: %v", err)
		}
	}
	t.Cleanup(func() { <-reloaded })
	if err := redistest.Eventually(t, 10*time.Second, func() error {
		info, err := admin.Info(ctx, "persistence").Result()
		if err == nil && !strings.Contains(info, "loading:1") {
			err = errors.New("node 0 not loading")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return wait
}

// enterKilled kills node 0; leave starts it again, empty.
func enterKilled(t *testing.T, c *cluster, _ *redistest.Forwarder) func() {
	t.Helper()
	if err := c.servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := c.servers[0].Restart(); err != nil {
			t.Fatal(err)
		}
	}
}

// enterGarbage garbles the next reply node 0 sends, which is then the
// answer to the next call: one reply that makes no sense, after which the
// connection's stream is out of step. It ends by itself.
func enterGarbage(t *testing.T, _ *cluster, fwd *redistest.Forwarder) func() {
	t.Helper()
	fwd.Garble()
	return func() {}
}

// The flake of the MASTERDOWN case, kept apart: a Release returns at a
// majority, so its call to a node may still be in the worker's queue when
// the node changes role; if it reaches the node only then, it fails, and
// the released key stays there until its TTL, refusing the next lock. That
// is Redlock's usual outcome of a failed release, not a lost node: the
// Locker's next lock takes the node again once the key has expired.
func TestReleaseFailedOnReplicaExpires(t *testing.T) {
	c := newCluster(t, 3)
	const ttl = 2 * time.Second
	l := c.locker(t, redlock.WithTTL(ttl))
	ctx := t.Context()
	const key = "stale-release"
	first := mustObtain(t, l, key)
	c.heldEverywhere(t, key, first.Token())
	dead := redistest.HangT(t)
	if err := c.clients[0].ConfigSet(ctx, "replica-serve-stale-data", "no").Err(); err != nil {
		t.Fatal(err)
	}
	// The release reaches node 0 only when it is a replica: its key stays.
	makeReplica(t, c, dead.Addr)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Behind the release's last call (Release returns at a majority): it
	// must not reach node 0 once it is a master again.
	if _, err := l.Inspect(ctx, key); err != nil {
		t.Fatal(err)
	}
	replicaOfNoOne(t, c)
	if c.holders(t, key, first.Token()) != 1 {
		t.Fatalf("released key not left on node 0 alone: %q", c.values(t, key))
	}
	// Not before the old key expires: then on every node.
	if err := redistest.Eventually(t, 10*ttl, func() error {
		if c.value(t, 0, key) != "" {
			return errors.New("old key still on node 0")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	votesAgain(t, c, l, 0, key)
}
