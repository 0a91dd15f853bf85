package conn

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// keepsConn reports whether a connection that got err is still fit for the
// next batch: only an error reply about the command itself leaves it so.
// A network error, a timeout or a reply that made no sense leaves it
// unusable (unread replies may follow); and go-redis marks a connection
// bad on READONLY and then refuses every later command on it, so a node
// that was a replica for a moment would stay lost. The other replies say
// the server is not a usable master right now (loading, cut off from its
// master): a new connection, which learns the server's identity again, is
// the cheap and safe answer to all of them. A cluster's redirects (MOVED,
// ASK, TRYAGAIN, CLUSTERDOWN) are about one call's slot, not the server:
// they keep the connection, and are never taken for a refusal of new
// connections (which would answer the next calls, of other slots too,
// with the same redirect unsent).
func keepsConn(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	return !redis.IsReadOnlyError(err) && !redis.IsLoadingError(err) && !redis.IsMasterDownError(err) &&
		!strings.HasPrefix(err.Error(), "redis: Conn is in a bad state")
}

// The wait after a node refused a new connection before the next try:
// refuseFirst after one refusal, doubled by each one in a row, at most
// refuseMax. A node back from an outage votes again within refuseMax of
// accepting connections.
const (
	refuseFirst = 5 * time.Millisecond
	refuseMax   = 50 * time.Millisecond
)

// refused records that the try of a new connection that began at now
// ended in err: the dial or set-up failed, or the connection's first batch
// got an error reply that ended it. A quick end is the node's refusal (nothing
// listens, a reset, a replica's READONLY): the batches of the next moment
// get err at once instead of another try, for refuseFirst and twice as long
// after each refusal in a row, up to refuseMax. A node that refuses costs
// then about 20 tries a second per queue, not one per batch, and a dial and
// set-up (behind a proxy, a TLS handshake, the scripts' loading) per batch
// made the calls to every other node wait for the CPU (the chaos suite's
// reset fault with no contention: 78 % of the rate before faults with a try
// per batch, 104 % with these waits). A try that took the batch's timeout
// is no refusal: the node is silent (see sendWatched), and the next batch
// tries again.
func (w *worker) refused(err error, now time.Time, timeout time.Duration) {
	end := time.Now()
	if end.Sub(now) >= timeout {
		return
	}
	w.backoff = min(max(2*w.backoff, refuseFirst), refuseMax)
	w.refusal, w.retryAt = err, end.Add(w.backoff)
}

// readOnly records a READONLY reply, on whichever batch of a connection:
// the node is a replica (for good, or until a failover promotes it). It
// ends the connection (see keepsConn), and the batches of the next
// refuseMax get err at once, as after refuseMax of refusals in a row. Its
// batches that do not write (the release of a key it does not hold)
// succeed and end a row of refusals, so with refused's doubling nearly
// every acquisition batch cost a new connection and its set-up (113 a
// second from one goroutine, 20 now; TestReplicaNodeTriedNowAndThen). A
// replica promoted votes again within refuseMax, as a node back from an
// outage.
func (w *worker) readOnly(err error) {
	w.backoff = refuseMax
	w.refusal, w.retryAt = err, time.Now().Add(refuseMax)
}

// failed is n replies that are all err.
func failed(ctx context.Context, n int, err error) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	for i := range cmds {
		cmds[i] = redis.NewCmd(ctx)
		cmds[i].SetErr(err)
	}
	return cmds
}

// settleConn decides from a batch's replies what becomes of the connection: the
// first error that leaves it unusable (keepsConn) abandons it, and records
// a refusal (a replica's READONLY, or an error reply to a fresh
// connection's first batch); a batch without one ends the refusals' backoff.
func (w *worker) settleConn(cmds []*redis.Cmd, fresh bool, timeout time.Duration, now time.Time) {
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil && !keepsConn(err) {
			w.abandon()
			var re redis.Error
			switch {
			case redis.IsReadOnlyError(err):
				// A replica, on any batch (see readOnly).
				w.readOnly(err)
			case fresh && errors.As(err, &re):
				// A new connection's first batch refused (LOADING,
				// ...). A network error after its set-up is none:
				// the node took the connection.
				w.refused(err, now, timeout)
			}
			return
		}
	}
	w.backoff = 0
}
