// Package wire is what the library and its nodes share: the names of the
// keys and channels the library keeps on a node, what kind of state each
// holds, and the layout of a lock's stored value. Every name is made here
// and nowhere else, so that every path that looks for held state (the
// quarantine's clearing, forced releases, inspection, the deployment
// checker) knows every kind of key, and a change of layout is made once.
package wire

import (
	"strconv"
	"strings"
)

// Reserved starts every key and channel the library keeps for itself on
// the nodes; a lock key may not start with it.
const Reserved = "redlock:"

// The prefixes of the library's keys and channels, and its fixed keys. The
// names are those of earlier versions, so that existing markers, counters
// and held locks stay in use across an upgrade.
const (
	// ReleasePrefix starts the channel on which a lock's release is
	// announced (ReleaseChannel).
	ReleasePrefix = Reserved + "released:"
	// FencePrefix starts a lock key's fencing counter (FenceKey).
	FencePrefix = Reserved + "fence:"
	// SemPrefix starts a semaphore's slots and size key.
	SemPrefix = Reserved + "sem:"
	// RWPrefix starts a read-write lock's leases, index and mark.
	RWPrefix = Reserved + "rw:"
	// CallPrefix starts a call nonce's key (once.lua writes it).
	CallPrefix = Reserved + "call:"
	// CheckPrefix starts the deployment checker's own probe keys.
	CheckPrefix = Reserved + "check:"
	// ForcedPrefix starts the note that a ForceRelease removed a hold
	// (ForcedKey); force.lua writes it, forced.lua reads it.
	ForcedPrefix = Reserved + "forced:"
	// GuardMarker and GuardQuarantine are the restart guard's memory
	// marker (no expiry) and quarantine, one of each per node.
	// GuardPassed is the guard's function's note of the run it last saw.
	GuardMarker     = Reserved + "guard:marker"
	GuardQuarantine = Reserved + "guard:quarantine"
	GuardPassed     = GuardMarker + ":passed"
)

// Suffixes of a semaphore's and a read-write lock's keys.
const (
	semSize = ":size"
	rwLease = ":r:"
	rwIndex = ":readers"
	rwMark  = ":wait"
)

// ReleaseChannel is where the release of lock key key is announced.
func ReleaseChannel(key string) string { return ReleasePrefix + key }

// FenceKey is the fencing counter of lock key key (a slot's, or a writer
// key's; a reader's lease counts on its writer key's: CounterOf).
func FenceKey(key string) string { return FencePrefix + key }

// Sem is the common prefix of semaphore name's keys, and the key that
// names it in a queue, a line or an announcement.
func Sem(name string) string { return SemPrefix + name }

// SemSlot is slot i of semaphore name: a permit's lock key.
func SemSlot(name string, i int) string { return Sem(name) + ":" + strconv.Itoa(i) }

// SemSize is the key that records semaphore name's size while any of its
// permits lives.
func SemSize(name string) string { return Sem(name) + semSize }

// SemOfSlot is the semaphore key (Sem) of slot key slot.
func SemOfSlot(slot string) string { return slot[:strings.LastIndexByte(slot, ':')] }

// SizeOfSlot is the size key of the semaphore of slot key slot.
func SizeOfSlot(slot string) string { return SemOfSlot(slot) + semSize }

// RWLease is the lease of the reader token of read-write lock name.
func RWLease(name, token string) string { return RWPrefix + name + rwLease + token }

// RWIndex is read-write lock name's index of leases (a set of lease keys).
func RWIndex(name string) string { return RWPrefix + name + rwIndex }

// RWMark is the mark of a writer of name that waits for its readers.
func RWMark(name string) string { return RWPrefix + name + rwMark }

// RWOfLease is the read-write lock's name (its writer key) of lease key
// lease.
func RWOfLease(lease string) string {
	_, lease = untag(lease)
	return lease[len(RWPrefix):strings.LastIndex(lease, rwLease)]
}

// IndexOfLease is the index of leases that lists lease key lease, in the
// lease's layout.
func IndexOfLease(lease string) string {
	tag, _ := untag(lease)
	return retag(tag, RWIndex(RWOfLease(lease)))
}

// CounterOf is the fencing counter of lock key key: a reader's lease
// counts on its writer key's, so that fences order readers and writers.
func CounterOf(key string) string {
	tag, _ := untag(key)
	if KindOf(key) == Lease {
		return retag(tag, FenceKey(RWOfLease(key)))
	}
	return retag(tag, FenceKey(key))
}

// CallKey is the key of a call nonce.
func CallKey(nonce string) string { return CallPrefix + nonce }

// CallNonce is the nonce of a call on key, made of the random number r: the
// hash tag of key's slot, then r, so that its key (CallKey, which once.lua
// writes) lives in key's slot on a cluster, in either layout. The nonce's
// key is kept for a moment only, so standalone servers need no other name.
func CallNonce(key string, r uint64) string {
	return SlotTag(Slot(key)) + strconv.FormatUint(r, 36)
}

// ForcedKey is the note that a ForceRelease removed hold key key (a lock
// key, a permit, a lease): the removed value, kept for the hold's
// remaining TTL and a grace, so that its holder can be told why its key
// is gone.
func ForcedKey(key string) string { return ForcedPrefix + key }

// Kind is what a key on a node holds.
type Kind int

// The kinds of keys on a node. Every key the library writes is one of them
// (Kinds lists them); any other key is a Lock key if its value is a lock's
// (IsLockValue), and none of the library's otherwise.
const (
	// Lock is a key the user named: a lock on one key, one key of a
	// multi-key lock, a read-write lock's writer key. Its value is a
	// lock's.
	Lock Kind = iota
	// Permit is a semaphore's slot, held by one permit; a lock's value.
	Permit
	// SemSizeKey records a semaphore's size while any permit lives.
	SemSizeKey
	// Lease is a reader's lease of a read-write lock; a lock's value.
	Lease
	// LeaseIndex lists a read-write lock's leases (a set).
	LeaseIndex
	// WriterMark keeps new readers out while a writer waits.
	WriterMark
	// Fence is a lock key's fencing counter.
	Fence
	// Marker, Quarantine and Passed are the restart guard's.
	Marker
	Quarantine
	Passed
	// Nonce is a call nonce's key: one vote per server per call.
	Nonce
	// Probe is a deployment check's own key.
	Probe
	// Forced notes that a ForceRelease removed a hold (ForcedKey).
	Forced
	kinds
)

// Kinds lists every kind of key, in order.
func Kinds() []Kind {
	out := make([]Kind, kinds)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

var kindNames = [kinds]string{"lock", "permit", "semaphore size", "reader's lease", "index of leases",
	"waiting writer's mark", "fencing counter", "guard marker", "guard quarantine", "guard note",
	"call nonce", "check key", "force-release note"}

// String names the kind in words.
func (k Kind) String() string {
	if k >= 0 && k < kinds {
		return kindNames[k]
	}
	return "kind " + strconv.Itoa(int(k))
}

// Holds reports whether a key of the kind, with a lock's value, is a hold
// that some client may still count on: a lock key, a permit, a lease.
// Every other kind lives only as long as holds do (size keys, indexes,
// marks), or is the library's bookkeeping.
func (k Kind) Holds() bool { return k == Lock || k == Permit || k == Lease }

// KindOf is the kind of key key by its name alone: Lock for any key
// outside Reserved (whose value then tells whether it is a lock).
func KindOf(key string) Kind {
	_, key = untag(key)
	switch {
	case !strings.HasPrefix(key, Reserved):
		return Lock
	case strings.HasPrefix(key, FencePrefix):
		return Fence
	case key == GuardMarker:
		return Marker
	case key == GuardQuarantine:
		return Quarantine
	case key == GuardPassed:
		return Passed
	case strings.HasPrefix(key, CallPrefix):
		return Nonce
	case strings.HasPrefix(key, CheckPrefix):
		return Probe
	case strings.HasPrefix(key, ForcedPrefix):
		return Forced
	case strings.HasPrefix(key, SemPrefix):
		if strings.HasSuffix(key, semSize) {
			return SemSizeKey
		}
		if i := strings.LastIndexByte(key, ':'); i >= len(SemPrefix) && digits(key[i+1:]) {
			return Permit
		}
	case strings.HasPrefix(key, RWPrefix):
		switch i := strings.LastIndex(key, rwLease); {
		case i > len(RWPrefix) && isUUID(key[i+len(rwLease):]):
			return Lease
		case strings.HasSuffix(key, rwIndex):
			return LeaseIndex
		case strings.HasSuffix(key, rwMark):
			return WriterMark
		}
	}
	// Under Reserved, but of no kind the library writes: a key of an
	// older or newer version, or someone else's. Treated as a lock key,
	// so that a path that looks for holds does not overlook it.
	return Lock
}

// isUUID reports whether s is a UUID in its text form (a lease's token).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdef", r) {
				return false
			}
		}
	}
	return true
}

// digits reports whether s is a non-empty run of decimal digits.
func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Name is the user's name of the lock that key belongs to: a lock key
// itself, the semaphore of a permit or size key, the read-write lock of a
// lease, an index, a mark, a counter or a force-release note of one of
// those; "" for the
// library's bookkeeping (guard keys, nonces, probes).
func Name(key string) string {
	_, key = untag(key)
	switch KindOf(key) {
	case Lock:
		return key
	case Permit:
		return SemOfSlot(key)[len(SemPrefix):]
	case SemSizeKey:
		return strings.TrimSuffix(key, semSize)[len(SemPrefix):]
	case Lease:
		return RWOfLease(key)
	case LeaseIndex:
		return strings.TrimSuffix(key, rwIndex)[len(RWPrefix):]
	case WriterMark:
		return strings.TrimSuffix(key, rwMark)[len(RWPrefix):]
	case Fence:
		return Name(key[len(FencePrefix):])
	case Forced:
		return Name(key[len(ForcedPrefix):])
	}
	return ""
}

// IsLockValue reports whether v is a value the scripts write for a hold:
// token, NUL, the holds (hold ids of [0-9a-z], each maybe with ":" and its
// fence, separated by spaces; none while a cooldown keeps the key), NUL,
// metadata.
func IsLockValue(v string) bool {
	token, rest, ok := strings.Cut(v, "\x00")
	if !ok || token == "" {
		return false
	}
	holds, _, ok := strings.Cut(rest, "\x00")
	if !ok {
		return false
	}
	for _, r := range holds {
		if (r < '0' || r > '9') && (r < 'a' || r > 'z') && r != ':' && r != ' ' {
			return false
		}
	}
	return true
}
