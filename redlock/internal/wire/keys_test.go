package wire_test

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/redlock/redlock/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Every name the package makes is of the kind KindOf says, and names the
// lock it belongs to, for names with colons, digits and reserved-looking
// parts too.
func TestKindOfNames(t *testing.T) {
	const lease = "6f1c3f7e-2b1a-4c55-9a57-1f0c2a9d7e11"
	for _, name := range []string{"k", "a:b", "x:size", "y:r:z", "job:42", "n:readers", "w:wait", "m:r:0123456789012345678901234567890"} {
		cases := []struct {
			key  string
			kind wire.Kind
		}{
			{name, wire.Lock},
			{wire.SemSlot(name, 0), wire.Permit},
			{wire.SemSlot(name, 17), wire.Permit},
			{wire.SemSize(name), wire.SemSizeKey},
			{wire.RWLease(name, lease), wire.Lease},
			{wire.RWIndex(name), wire.LeaseIndex},
			{wire.RWMark(name), wire.WriterMark},
			{wire.FenceKey(name), wire.Fence},
			{wire.FenceKey(wire.SemSlot(name, 3)), wire.Fence},
			{wire.ForcedKey(name), wire.Forced},
			{wire.ForcedKey(wire.SemSlot(name, 3)), wire.Forced},
			{wire.ForcedKey(wire.RWLease(name, lease)), wire.Forced},
		}
		for _, c := range cases {
			if got := wire.KindOf(c.key); got != c.kind {
				t.Errorf("KindOf(%q) = %s, want %s", c.key, got, c.kind)
			}
			if got := wire.Name(c.key); got != name {
				t.Errorf("Name(%q) = %q, want %q", c.key, got, name)
			}
		}
		if got := wire.CounterOf(wire.RWLease(name, lease)); got != wire.FenceKey(name) {
			t.Errorf("a lease of %q counts on %q, want the writer key's", name, got)
		}
		if got := wire.IndexOfLease(wire.RWLease(name, lease)); got != wire.RWIndex(name) {
			t.Errorf("IndexOfLease: %q", got)
		}
		if got := wire.SizeOfSlot(wire.SemSlot(name, 9)); got != wire.SemSize(name) {
			t.Errorf("SizeOfSlot: %q", got)
		}
	}
	for key, kind := range map[string]wire.Kind{
		wire.GuardMarker: wire.Marker, wire.GuardQuarantine: wire.Quarantine, wire.GuardPassed: wire.Passed,
		wire.CallKey("n"): wire.Nonce, wire.CheckPrefix + "x": wire.Probe,
	} {
		if got := wire.KindOf(key); got != kind {
			t.Errorf("KindOf(%q) = %s, want %s", key, got, kind)
		}
	}
}

// The scripts name the guard's keys and the call nonces' as this package
// does: a script that spelled one otherwise would keep state no admin path
// knows of.
func TestScriptsUseTheseNames(t *testing.T) {
	for file, names := range map[string][]string{
		"../scripts/once.lua":    {"'" + wire.CallPrefix + "'"},
		"../scripts/library.lua": {"':passed'"},
	} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !strings.Contains(string(src), n) {
				t.Errorf("%s does not name %s", file, n)
			}
		}
	}
	if wire.GuardPassed != wire.GuardMarker+":passed" {
		t.Errorf("GuardPassed is %q", wire.GuardPassed)
	}
}

// A lock's value is told from any other string.
func TestIsLockValue(t *testing.T) {
	for v, want := range map[string]bool{
		"tok\x001\x00":            true,
		"tok\x00\x00meta":         true, // a cooldown: no hold
		"tok\x001:42 2\x00m\x00x": true,
		"\x001\x00":               false,
		"tok\x001":                false,
		"1795879839488570":        false,
		"tok\x00A\x00":            false,
	} {
		if got := wire.IsLockValue(v); got != want {
			t.Errorf("IsLockValue(%q) = %v", v, got)
		}
	}
}
