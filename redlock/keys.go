package redlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// ReservedPrefix starts every key and channel the library keeps for itself
// on the nodes; lock keys that start with it fail with ErrInvalid.
const ReservedPrefix = wire.Reserved

// The library's own keys and channels are named in internal/wire, and
// nowhere else. No lock key may start with ReservedPrefix (checkKey): a
// lock named like one of them could otherwise delete the restart guard's
// marker (a cluster-wide outage, as every guarded node then abstains),
// reset another key's fencing counter, or fake a release announcement.
const releasePrefix = wire.ReleasePrefix

// ACLRule is the least a Redis user needs for everything the library does
// (ACL SETUSER name on >password ACLRule), doctor.Check included: any key, and the release
// announcements' channels only.
const ACLRule = "resetkeys ~* resetchannels &" + releasePrefix + "* -@all " +
	"+evalsha +eval +script|load +function|load +fcall +get +set +del +exists +incr +pexpire +pttl +publish +time " +
	"+sadd +srem +smembers +srandmember +info +client|info +client|kill +subscribe +unsubscribe +ping +scan +config|get +cluster|slots +cluster|info"

// MaxKeyLen bounds lock keys, in bytes.
const MaxKeyLen = 4096

// checkKey rejects a lock key that is empty, longer than MaxKeyLen, or
// reserved for the library's own keys. Any other byte string is a key,
// NUL bytes and invalid UTF-8 included: Redis keys are binary-safe, and the
// key is never parsed out of a value.
func checkKey(key string) error {
	switch {
	case key == "":
		return keyError("empty key")
	case len(key) > MaxKeyLen:
		return keyError("key of %d bytes is longer than %d", len(key), MaxKeyLen)
	case strings.HasPrefix(key, ReservedPrefix):
		return keyError("key %s starts with %q, which is reserved for the library's own keys", quoteKey(key), ReservedPrefix)
	}
	return nil
}

// checkKeys checks the keys of an acquisition: one, or up to MaxMultiKeys
// for a multi-key lock, each a key checkKey takes, none given twice.
func checkKeys(keys []string) error {
	switch {
	case len(keys) == 0:
		return keyError("no keys")
	case len(keys) > MaxMultiKeys:
		return keyError("%d keys, more than the %d a multi-key lock takes", len(keys), MaxMultiKeys)
	}
	for i, key := range keys {
		if err := checkKey(key); err != nil {
			return err
		}
		if slices.Contains(keys[:i], key) {
			return keyError("key %s is given twice (at %d)", quoteKey(key), i)
		}
	}
	return nil
}

// checkKeys is checkKeys with the nodes' rule: on a Locker with a cluster
// node, a multi-key lock's keys must share a slot, as a script's keys must.
func (l *Locker) checkKeys(keys []string) error {
	if err := checkKeys(keys); err != nil || !l.cfg.layout.Clustered() {
		return err
	}
	for _, key := range keys[1:] {
		if wire.Slot(key) != wire.Slot(keys[0]) {
			return keyError("keys %s and %s are in different slots of a Redis Cluster: give them a common hash tag ({order}:a, {order}:b)", quoteKey(keys[0]), quoteKey(key))
		}
	}
	return nil
}

// releaseChannel is where the release script announces that key is free.
func releaseChannel(key string) string { return wire.ReleaseChannel(key) }

// guardKeys are the restart guard's marker and quarantine that a call on
// key reads, in the nodes' layout.
func (c *config) guardKeys(key string) (marker, quarantine string) {
	return c.layout.GuardMarker(key), c.layout.GuardQuarantine(key)
}

// keyError is a bad key's error, matching ErrInvalid: the key's rules and
// their messages in one place.
func keyError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// notTried is the error of an acquisition of key whose ctx has ended before
// it asked any node. It matches ctx.Err(), and neither ErrNotObtained nor
// ErrNoQuorum: nothing is known of the nodes.
func notTried(ctx context.Context, key string) error {
	return fmt.Errorf("%w: obtain %s: %w", errNotTried, quoteKey(key), ctx.Err())
}

// Key shortening: a key longer than keyShortAt bytes is shown as its
// first keyHead and last keyTail bytes around an ellipsis, with its length.
const (
	keyHead    = 40
	keyTail    = 20
	keyShortAt = keyHead + keyTail + 4
)

// quoteKey is key as messages show it: quoted like %q, so control bytes
// and invalid UTF-8 are escaped, and shortened when long ("first 40…last
// 20" (n bytes)). The cut falls on rune boundaries.
func quoteKey(key string) string {
	if len(key) <= keyShortAt {
		return strconv.Quote(key)
	}
	head, tail := keyHead, len(key)-keyTail
	for head > 0 && !utf8.RuneStart(key[head]) {
		head--
	}
	for tail < len(key) && !utf8.RuneStart(key[tail]) {
		tail++
	}
	return strconv.Quote(key[:head]+"…"+key[tail:]) + " (" + strconv.Itoa(len(key)) + " bytes)"
}
