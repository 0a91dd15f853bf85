// Package fenced provides the resource's half of fencing: writes that
// apply only while the writer's fence is the highest the resource has
// seen, so that a holder that lost its lock (paused past its validity,
// cut off, behind a clock jump) cannot overwrite what a later holder
// wrote.
//
// A lock taken with redlock.WithFencing carries a fence (Lock.Fence) that
// grows strictly across the holders of its key. The resource keeps the
// highest fence it accepted and refuses a lower one in the same atomic
// step as the write:
//
//   - In SQL, a Table keeps one high-water mark per lock key in a side
//     table (Table.Schema). Table.Claim raises it inside the caller's
//     transaction, and the transaction's writes commit only with the claim.
//     Keyed by Lock.Key, a semaphore's permits get one mark per slot, and a
//     read-write lock's writers one mark for the lock.
//   - In Redis, SetString and SetField keep the fence inside the value
//     they write (a string key or a hash field), compared and written by
//     one script, so it lives in the value's slot on a cluster.
//
// An equal fence is accepted: it can only be the same holder's (fences of
// different holders of a key differ), so a holder may write many times.
// The package imports no database driver; docs/fencing.md gives the
// schema, the isolation levels each store is correct under, and what each
// guarantees.
package fenced
