// Package redlock provides distributed locks over N independent Redis masters
// (the Redlock algorithm), or over a single Redis server with the same code.
//
// A lock is granted when a majority of nodes (N/2+1) accepted it, and it is
// safe to use only until its validity deadline: TTL minus the time the
// acquisition took minus a drift margin for the servers' clocks. All nodes are
// asked in parallel; the answer comes as soon as the outcome is decided, and a
// failed attempt removes whatever it wrote, even on nodes that answer late.
//
// Errors tell contention (ErrNotObtained) from an outage (ErrNoQuorum), and
// carry per-node detail in a *QuorumError:
//
//	lock, err := locker.Obtain(ctx, "report:daily", redlock.WithTTL(30*time.Second))
//	if errors.Is(err, redlock.ErrNotObtained) {
//		return nil // someone else runs it
//	}
//	if err != nil {
//		return err // nodes down: err says which
//	}
//	defer lock.Release(context.WithoutCancel(ctx))
//
// Two things are built on the same locks: leader election (Campaign, with
// Leader and Observe to follow who leads; the leader's term is a fencing
// token) and multi-key locks (ObtainMulti: several keys at once, all or
// none, without deadlock whatever the order).
//
// Lock keys are the caller's, with one exception: keys that start with
// ReservedPrefix ("redlock:") are the library's own (the restart guard's
// markers, fencing counters, release channels), and every call that takes
// a key rejects them with ErrInvalid, so that a key taken from user input
// cannot reach them.
//
// What Redlock guarantees, and what it cannot, is in the README's safety
// section: mutual exclusion holds while a majority of nodes keep their keys
// (no restart without persistence within a TTL) and while a holder stops
// using the lock at its deadline (Valid, Until).
package redlock
