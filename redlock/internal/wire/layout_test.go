package wire_test

import (
	"testing"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

// In the Clustered layout every key of a lock lives in the slot of the
// lock's name, whatever bytes the name holds, and is read back as the kind
// and lock it is, as in the Standalone layout, which keeps today's names.
func TestLayouts(t *testing.T) {
	const lease = "6f1c3f7e-2b1a-4c55-9a57-1f0c2a9d7e11"
	for _, name := range []string{"k", "a:b", "{user1}:x", "}{", "job:42", "y:r:z", "n:readers"} {
		for _, ly := range []wire.Layout{wire.Standalone, wire.Clustered} {
			cases := []struct {
				key  string
				kind wire.Kind
			}{
				{ly.FenceKey(name), wire.Fence},
				{ly.SemSlot(name, 3), wire.Permit},
				{ly.SemSize(name), wire.SemSizeKey},
				{ly.RWLease(name, lease), wire.Lease},
				{ly.RWIndex(name), wire.LeaseIndex},
				{ly.RWMark(name), wire.WriterMark},
				{ly.FenceKey(ly.SemSlot(name, 3)), wire.Fence},
				{ly.GuardMarker(name), wire.Marker},
				{ly.GuardQuarantine(name), wire.Quarantine},
				{wire.CallKey(wire.CallNonce(name, 1)), wire.Nonce},
				{ly.ForcedKey(name), wire.Forced},
				{ly.CounterOf(name), wire.Fence},
			}
			for _, c := range cases {
				if got := wire.KindOf(c.key); got != c.kind {
					t.Errorf("%v: KindOf(%q) = %s, want %s", ly, c.key, got, c.kind)
				}
				if c.kind != wire.Marker && c.kind != wire.Quarantine && c.kind != wire.Nonce {
					if got := wire.Name(c.key); got != name {
						t.Errorf("%v: Name(%q) = %q, want %q", ly, c.key, got, name)
					}
				}
				if ly == wire.Clustered && wire.Slot(c.key) != wire.Slot(name) {
					t.Errorf("%q is in slot %d, its lock %q in %d", c.key, wire.Slot(c.key), name, wire.Slot(name))
				}
			}
			l := ly.RWLease(name, lease)
			if got := wire.IndexOfLease(l); got != ly.RWIndex(name) {
				t.Errorf("IndexOfLease(%q) = %q, want %q", l, got, ly.RWIndex(name))
			}
			if got := ly.CounterOf(name); got != ly.FenceKey(name) {
				t.Errorf("%v: CounterOf(%q) = %q, want %q", ly, name, got, ly.FenceKey(name))
			}
			if got := wire.CounterOf(l); got != ly.FenceKey(name) {
				t.Errorf("CounterOf(%q) = %q, want %q", l, got, ly.FenceKey(name))
			}
			if got := wire.SizeOfSlot(ly.SemSlot(name, 3)); got != ly.SemSize(name) {
				t.Errorf("SizeOfSlot: %q, want %q", got, ly.SemSize(name))
			}
		}
		if wire.Standalone.FenceKey(name) != wire.FenceKey(name) || wire.Standalone.GuardMarker(name) != wire.GuardMarker {
			t.Errorf("the Standalone layout changed today's names")
		}
	}
}
