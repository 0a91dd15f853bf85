package lockers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis/rueidislock"
	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/bench/internal/lockers"
	"github.com/quorumlock/redlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newImpl sets up mode over clients and closes it at cleanup.
func newImpl(t *testing.T, m lockers.Mode, clients []redis.UniversalClient) lockers.Impl {
	t.Helper()
	impl, err := lockers.New(m, clients)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := impl.Close(); err != nil {
			t.Error(err)
		}
	})
	return impl
}

// TestFloorNeedsAMajority runs the floor over three servers: it answers
// with one of them dead, and fails at once, saying why, with two dead.
func TestFloorNeedsAMajority(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{})
	clients := universal(redistest.ClientsT(t, servers))
	w := newImpl(t, lockers.Mode{Impl: lockers.Floor, Nodes: 3}, clients).NewWorker()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := w.Unlock(ctx); err == nil {
		t.Error("Unlock before Lock succeeded")
	}
	cycle := func() error {
		if err := w.Lock(ctx, "k", true); err != nil {
			return err
		}
		return w.Unlock(ctx)
	}
	if err := cycle(); err != nil {
		t.Fatalf("all nodes up: %v", err)
	}
	if err := servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cycle(); err != nil {
		t.Fatalf("one node of three down: %v", err)
	}
	if err := servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	err := w.Lock(ctx, "k", true)
	if err == nil || !strings.Contains(err.Error(), "no majority of 3 nodes") {
		t.Fatalf("two nodes of three down: Lock = %v, want no majority", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the floor waited for the context instead of failing")
	}
}

// TestRueidislockExcludes checks the adapter: a held lock keeps a second
// worker out, and Unlock lets it in.
func TestRueidislockExcludes(t *testing.T) {
	servers := redistest.StartT(t, 1, redistest.Options{})
	clients := universal(redistest.ClientsT(t, servers))
	impl := newImpl(t, lockers.Mode{Impl: lockers.Rueidislock, Nodes: 1}, clients)
	a, b := impl.NewWorker(), impl.NewWorker()
	ctx := t.Context()
	if err := a.Lock(ctx, "k", false); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx, "k", false); !errors.Is(err, rueidislock.ErrNotLocked) {
		t.Fatalf("second Lock while held = %v, want ErrNotLocked", err)
	}
	// Its key is where the README says, under the one prefix.
	if n, err := clients[0].Exists(ctx, lockers.RueidisKeyPrefix+":0:k").Result(); err != nil || n != 1 {
		t.Errorf("key %s:0:k: exists %d, %v", lockers.RueidisKeyPrefix, n, err)
	}
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx, "k", false); err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lockers.New(lockers.Mode{Impl: lockers.Rueidislock, Nodes: 3}, clients); err == nil {
		t.Error("rueidislock over three nodes accepted")
	}
}

// universal returns clients as the go-redis interface the modes take.
func universal(clients []*redis.Client) []redis.UniversalClient {
	u := make([]redis.UniversalClient, len(clients))
	for i, c := range clients {
		u[i] = c
	}
	return u
}
