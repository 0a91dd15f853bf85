package scripts_test

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/redlock/internal/scripts"
)

// Every script fits in one argument of a connection that has not
// authenticated yet (Redis ends such a connection beyond 16 KB), so that a
// missing password is answered NOAUTH (see newScript).
func TestScriptsFitUnauthenticated(t *testing.T) {
	if len(scripts.All) < 15 {
		t.Fatalf("%d scripts listed, want every one of the 15", len(scripts.All))
	}
	for _, s := range scripts.All {
		if len(s.Src) > 16*1024 {
			t.Errorf("a script of %d bytes (SHA %s), more than 16 KB", len(s.Src), s.Hash())
		}
	}
	// The handshake sends the function library in the same pipeline.
	if len(scripts.Library) > 16*1024 {
		t.Errorf("the function library has %d bytes, more than 16 KB", len(scripts.Library))
	}
}

// Each guarded acquisition runs its script's source where the server has
// no library, and names a function of the library where it has.
func TestGuardedVariants(t *testing.T) {
	for _, s := range []*scripts.Script{scripts.Acquire, scripts.AcquireMulti, scripts.Handoff, scripts.AcquireSlot, scripts.RWRead, scripts.RWWrite} {
		g := s.Guarded(true)
		if g == s || g.Src != s.Src || g.Fn == "" || !strings.Contains(scripts.Library, "'"+g.Fn+"'") {
			t.Errorf("the guarded variant of the script %s: Fn %q, same source %v", s.Hash(), g.Fn, g.Src == s.Src)
		}
		if s.Guarded(false) != s {
			t.Errorf("the script %s without the guard is not itself", s.Hash())
		}
	}
	// The lean acquisition names the guard's keys itself.
	for _, want := range []string{"_acquire_lean'", "'" + scripts.GuardMarker + "'", "'" + scripts.GuardQuarantine + "'"} {
		if !strings.Contains(scripts.Library, want) {
			t.Errorf("the library has no %s", want)
		}
	}
	if scripts.Release.Guarded(true) != scripts.Release {
		t.Error("release.lua has a guarded variant")
	}
}
