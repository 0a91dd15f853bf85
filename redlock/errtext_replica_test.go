package redlock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// A replica given as a node is named as one in every error it causes: an
// acquisition that it refuses (READONLY), an extension and a release that
// find no key there.
func TestReplicaNodeNamedInErrors(t *testing.T) {
	c := newCluster(t, 3)
	r := redistest.StartReplicaT(t, c.servers[0], redistest.Options{})
	rc := r.NewClient()
	t.Cleanup(func() { _ = rc.Close() })
	l := newLocker(t, []*redis.Client{rc, c.clients[1], c.clients[2]})
	lock := mustObtain(t, l, "k")
	if err := c.servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	want := r.Addr + " (a replica, not a master: give masters only)"
	_, err := l.TryObtain(t.Context(), "k2")
	if err == nil || !strings.Contains(err.Error(), want+" error: refused as a replica: READONLY") {
		t.Fatalf("obtain: %v; want the replica %s named as one", err, r.Addr)
	}
	if err := lock.Extend(t.Context(), 10*time.Second); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("extend: %v; want the replica named as one", err)
	}
	if err := lock.Release(t.Context()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("release: %v; want the replica named as one", err)
	}
}
