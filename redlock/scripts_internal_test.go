package redlock

import "testing"

// Every script fits in one argument of a connection that has not
// authenticated yet (Redis ends such a connection beyond 16 KB), so that a
// missing password is answered NOAUTH (see newScript).
func TestScriptsFitUnauthenticated(t *testing.T) {
	for _, s := range scripts {
		if len(s.src) > 16*1024 {
			t.Errorf("a script of %d bytes (SHA %s), more than 16 KB", len(s.src), s.Hash())
		}
	}
}
