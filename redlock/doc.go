// Package redlock provides distributed locks over N independent Redis masters
// (the Redlock algorithm), or over a single Redis server with the same code.
//
// A lock is granted when a majority of nodes (N/2+1) accepted it, and it is
// safe to use only until its validity deadline (Lock.Until): TTL minus the
// time the acquisition took minus a drift margin for the servers' clocks.
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
// Built on the same locks: leader election (Campaign, Leader, Observe) and
// multi-key locks (ObtainMulti). Keys that start with ReservedPrefix are the
// library's own, and every call that takes a key rejects them.
//
// # Goroutines
//
// The package starts goroutines in these places only (a test keeps this
// list and the code in step):
//
//   - Node workers: New starts two per node, each with one connection of
//     the Locker's own, that send the queued script calls in batches. Close
//     ends them last, after the calls queued by background work have been
//     answered, and waits for them.
//   - Release listeners: the first Obtain that waits for a key subscribes,
//     once per node for the whole Locker, and starts a goroutine per node
//     that hands that node's release announcements to the waiters (go-redis
//     runs the subscription's own goroutines beside it). Each subscribe or
//     unsubscribe call runs in a goroutine per node (quorum.Each: waited for
//     up to the node timeout, then by the Locker's background group). Close
//     ends the subscriptions and waits for the listeners.
//   - ObtainMulti, while it waits, runs a goroutine per key that passes
//     the key's release announcements on; it ends them before it returns.
//   - The extender: KeepAlive (and Do, Campaign, through it) hands the lock
//     to one goroutine for all of the Locker's kept locks, started with the
//     first and ended when none is left. It sends the extensions due
//     together as one round per node, each round in a goroutine of its own
//     holding the Locker's guard, so Close waits for the rounds. Nobody
//     waits for the extender's own goroutine: it ends by itself once no
//     lock is kept (stop, ctx, a loss, or Close, which ends every KeepAlive).
//   - Observe runs one goroutine per call, which ends when its ctx ends or
//     at its first look after Close; nobody waits for it.
//
// Rounds start no goroutine of their own: node calls go through the
// workers. The work that outlives a call (the replies of nodes still out
// when its round was decided, the undo of a late grant, a handoff that its
// receiver has not taken over yet) is counted on the Locker's background
// group. Close shuts down in this order: it refuses new operations and
// waits for those that are starting work; it wakes the waiters in line; it
// ends the release listeners; it waits for the background group; it stops
// the node workers.
//
// WithObserver hands every operation to an Observer, for metrics or
// traces (docs/observability.md; redlockotel is one for OpenTelemetry).
//
// The repository's docs/safety.md says what a lock guarantees and under
// which assumptions, internals.md how it works, cli.md the redlock command.
package redlock
