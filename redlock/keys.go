package redlock

import "strings"

// ReservedPrefix starts every key and channel the library keeps for itself
// on the nodes; lock keys that start with it fail with ErrInvalid.
const ReservedPrefix = "redlock:"

// The library's own keys and channels. No lock key may start with
// ReservedPrefix (checkKey): a lock named like one of them could otherwise
// delete the restart guard's marker (a cluster-wide outage, as every
// guarded node then abstains), reset another key's fencing counter, or fake
// a release announcement. The names are those of earlier versions, so
// existing markers and counters stay in use.
const (
	// releasePrefix starts the channel on which the release of a key is
	// announced.
	releasePrefix = ReservedPrefix + "released:"
	// fencePrefix starts the key of a lock key's fencing counter, which
	// expires defaultFenceLifetime after its last grant or write-back (see
	// WithFencing).
	fencePrefix = ReservedPrefix + "fence:"
	// guardMarker and guardQuarantine are the restart guard's memory marker
	// (no expiry) and quarantine, one of each per node.
	guardMarker     = ReservedPrefix + "guard:marker"
	guardQuarantine = ReservedPrefix + "guard:quarantine"
)

// ACLRule is the least a Redis user needs for everything the library does
// (ACL SETUSER name on >password ACLRule), doctor.Check included: any key, and the release
// announcements' channels only.
const ACLRule = "resetkeys ~* resetchannels &" + releasePrefix + "* -@all " +
	"+evalsha +eval +script|load +function|load +fcall +get +set +del +exists +incr +pexpire +pttl +publish +time " +
	"+info +client|info +client|kill +subscribe +unsubscribe +ping +scan +config|get"

// MaxKeyLen bounds lock keys, in bytes.
const MaxKeyLen = 4096

// checkKey rejects a lock key that is empty, longer than MaxKeyLen, or
// reserved for the library's own keys. Any other byte string is a key,
// NUL bytes and invalid UTF-8 included: Redis keys are binary-safe, and the
// key is never parsed out of a value.
func checkKey(key string) error {
	switch {
	case key == "":
		return invalid("empty key")
	case len(key) > MaxKeyLen:
		return invalid("key of %d bytes is longer than %d", len(key), MaxKeyLen)
	case strings.HasPrefix(key, ReservedPrefix):
		return invalid("key %s starts with %q, which is reserved for the library's own keys", quoteKey(key), ReservedPrefix)
	}
	return nil
}

// releaseChannel is where the release script announces that key is free.
func releaseChannel(key string) string { return releasePrefix + key }

// fenceKey is the key of the fencing counter of a lock key.
func fenceKey(key string) string { return fencePrefix + key }
