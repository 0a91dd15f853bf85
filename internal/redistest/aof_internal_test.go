package redistest

import "testing"

// A checkpoint waits for a server whose AOF buffer still holds writes, or
// that rewrites its AOF; a server without AOF, or with it written, passes.
func TestAOFWritten(t *testing.T) {
	for _, tc := range []struct {
		info string
		want bool
	}{
		{"# Persistence\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\n", true},
		{"# Persistence\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_buffer_length:0\r\n", true},
		{"# Persistence\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_buffer_length:112\r\n", false},
		{"# Persistence\r\naof_enabled:1\r\naof_rewrite_in_progress:1\r\naof_rewrite_scheduled:0\r\naof_buffer_length:0\r\n", false},
		{"# Persistence\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:1\r\naof_buffer_length:0\r\n", false},
	} {
		if got := aofWritten(tc.info); got != tc.want {
			t.Errorf("aofWritten(%q) = %v, want %v", tc.info, got, tc.want)
		}
	}
}
