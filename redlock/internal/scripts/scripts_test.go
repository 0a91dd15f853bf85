package scripts_test

import (
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
}
