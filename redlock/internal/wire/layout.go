package wire

import "strings"

// Layout is how one kind of node names the library's keys of a lock. A
// standalone server keeps today's names (Standalone), so that an upgrade
// keeps held locks. A Redis Cluster runs a script only over keys of one
// slot, so there every key the library keeps for a lock (its fencing
// counter, a semaphore's slots and size, a read-write lock's leases, index
// and mark, the call nonces, the restart guard's marker and quarantine)
// carries the hash tag of the lock's slot (Clustered), right after
// Reserved: "redlock:{tag}:fence:" + key lives in key's slot whatever bytes
// key holds. The package's functions are Standalone's; KindOf, Name and
// the functions that derive one key from another read either layout.
type Layout struct{ clustered bool }

var (
	// Standalone is the layout of a standalone server: today's names.
	Standalone = Layout{}
	// Clustered is the layout of a Redis Cluster: each lock's keys in its
	// slot.
	Clustered = Layout{clustered: true}
)

// tagged inserts the hash tag of name's slot after Reserved in key, one
// of the package's own (Standalone) names; Standalone leaves it as it is.
func (ly Layout) tagged(name, key string) string {
	if !ly.clustered {
		return key
	}
	return retag(SlotTag(Slot(name)), key)
}

// ReleaseChannel is where the release of lock key key is announced.
func (ly Layout) ReleaseChannel(key string) string { return ly.tagged(key, ReleaseChannel(key)) }

// FenceKey is the fencing counter of lock key key.
func (ly Layout) FenceKey(key string) string { return ly.tagged(key, FenceKey(key)) }

// SemSlot is slot i of semaphore name; SemSize is its size key.
func (ly Layout) SemSlot(name string, i int) string { return ly.tagged(name, SemSlot(name, i)) }

// SemSize is the key of semaphore name's size.
func (ly Layout) SemSize(name string) string { return ly.tagged(name, SemSize(name)) }

// RWLease is the lease of reader token of read-write lock name.
func (ly Layout) RWLease(name, token string) string { return ly.tagged(name, RWLease(name, token)) }

// RWIndex is read-write lock name's index of leases.
func (ly Layout) RWIndex(name string) string { return ly.tagged(name, RWIndex(name)) }

// RWMark is the mark of a writer of name that waits for its readers.
func (ly Layout) RWMark(name string) string { return ly.tagged(name, RWMark(name)) }

// GuardMarker and GuardQuarantine are the restart guard's keys that a call
// on key key reads: the node's own on a standalone server, its slot's on a
// cluster (a cluster's shards each keep theirs, per slot, and a slot's
// keys move with it).
func (ly Layout) GuardMarker(key string) string { return ly.tagged(key, GuardMarker) }

// GuardQuarantine: see GuardMarker.
func (ly Layout) GuardQuarantine(key string) string { return ly.tagged(key, GuardQuarantine) }

// untag splits a key of the Clustered layout into its hash tag (braces
// included) and the key without it; a key of the Standalone layout has
// no tag.
func untag(key string) (tag, rest string) {
	if !strings.HasPrefix(key, Reserved+"{") {
		return "", key
	}
	after := key[len(Reserved):]
	end := strings.Index(after, "}:")
	if end < 0 {
		return "", key
	}
	return after[:end+1], Reserved + after[end+2:]
}

// retag puts tag (possibly "") after Reserved in key, a Standalone name.
func retag(tag, key string) string {
	if tag == "" {
		return key
	}
	return Reserved + tag + ":" + key[len(Reserved):]
}

// Clustered reports whether the layout is a cluster's.
func (ly Layout) Clustered() bool { return ly.clustered }

// String names the layout.
func (ly Layout) String() string {
	if ly.clustered {
		return "clustered"
	}
	return "standalone"
}

// CounterOf is the fencing counter of lock key key (CounterOf) in this
// layout: a lock key of the caller's, which carries no tag of ours, gets
// its slot's on a cluster.
func (ly Layout) CounterOf(key string) string {
	if tag, _ := untag(key); tag != "" || !ly.clustered {
		return CounterOf(key)
	}
	return ly.FenceKey(key)
}

// ForcedPrefix is the prefix of the notes that a ForceRelease leaves for
// hold keys in key's slot (force.lua appends the hold key).
func (ly Layout) ForcedPrefix(key string) string { return ly.tagged(key, ForcedPrefix) }

// ForcedKey is the note that a ForceRelease removed hold key key (see
// ForcedKey), where force.lua writes it in this layout.
func (ly Layout) ForcedKey(key string) string { return ly.ForcedPrefix(key) + key }
