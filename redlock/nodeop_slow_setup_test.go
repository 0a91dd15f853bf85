package redlock_test

import (
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/redlock"
)

// Nodes whose connections take longer to come up than the node timeout (a
// TLS handshake to a far region, say: several round trips, where a call
// needs one) still vote once connected. The set-up used to share the node
// timeout of the call that needed it: it failed at every attempt, the
// connection was dropped, and the next attempt began again from a new
// dial, so that such a node never voted.
func TestSlowConnectionSetUpStillVotes(t *testing.T) {
	servers := redistest.StartT(t, 3, redistest.Options{})
	const slow, timeout = 150 * time.Millisecond, 50 * time.Millisecond
	l := newLocker(t, dialClients(t, servers, slowDial(slow)), redlock.WithNodeTimeout(timeout))
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		var lock *redlock.Lock
		if lock, err = l.TryObtain(t.Context(), "far"); err == nil {
			if err := lock.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no lock in 5s from nodes whose dial takes %v, node timeout %v: %v", slow, timeout, err)
}
