package wire_test

import (
	"testing"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// Slot agrees with the slots Redis documents and computes (CLUSTER KEYSLOT
// on redis 7.0.15: foo 12182, bar 5061, the tag of {user1000}.following
// 3443, an empty tag hashing the whole key).
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363,
		"foo{{bar}}zap":        4015,
		"foo{bar}{zap}":        5061,
		"123456789":            12739,
	} {
		if got := wire.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

// Every slot has a tag, and a key made of a brace-free prefix, the tag
// and any rest lives in that slot.
func TestSlotTag(t *testing.T) {
	seen := map[string]bool{}
	for s := range wire.Slots {
		tag := wire.SlotTag(s)
		if seen[tag] {
			t.Fatalf("tag %s given twice", tag)
		}
		seen[tag] = true
		for _, rest := range []string{"", "k", "{x}", "}{", "a{b}c"} {
			if got := wire.Slot("redlock:" + tag + ":fence:" + rest); got != s {
				t.Fatalf("slot %d: key with tag %s and rest %q is in slot %d", s, tag, rest, got)
			}
		}
	}
}
