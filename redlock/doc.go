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
// Built on the same locks: leader election (Campaign, Leader, Observe),
// multi-key locks (ObtainMulti), Semaphore and RWMutex. Keys that start
// with ReservedPrefix are the library's own; calls reject them.
//
// # Goroutines
//
// The package starts goroutines in these places only (a test keeps this
// list and the code in step; docs/internals.md#goroutines tells more):
//
//   - Node workers: New starts two per node, each with a connection of the
//     Locker's own (a timer notes a slow set-up); Close waits for them. A
//     cluster node has two per master, and one goroutine that reads the
//     cluster's slot map (when told of a redirect, and every 5 s), which
//     Close ends. A Sentinel node has two per master its sentinels have
//     named, and one goroutine that watches the group's sentinels (a
//     switch they announce, a failed call, and every second), which Close
//     ends.
//   - Release listeners: one per node for the whole Locker, made by a timer
//     after a wait (a failed one is closed apart), one per node for each
//     subscribe or unsubscribe call; Close ends them and waits.
//   - ObtainMulti (and a Semaphore's Obtain, which waits on its slot keys),
//     while it waits, runs a goroutine per key that passes its release
//     announcements on, and ends them before it returns.
//   - The extender: one goroutine keeps all of the Locker's KeepAlive locks
//     and ends by itself when none is left; it sends each round in a
//     goroutine of its own holding the Locker's guard, which Close waits for.
//     A round that finds locks lost tells each in a goroutine of its own
//     (one more round may say why), and waits for them.
//   - Observe runs one goroutine per call, which ends with its ctx or at its
//     first look after Close.
//   - Inspect of a Semaphore or RWMutex: one per key, 16 at once, waited for.
//   - Bootstrap on a Locker with a cluster node seeds each slot's marker,
//     32 slots at once, and waits for them.
//
// Rounds start none: node calls go through the workers, and work that
// outlives a call (stragglers' replies, undos, handoffs) is counted on the
// Locker's background group, which Close waits for.
//
// Guarantees: docs/safety.md; how it works: docs/internals.md.
package redlock
