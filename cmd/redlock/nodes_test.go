package main

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://h:6379", "redis://h:6379"},
		{"redis://u:pw@h:6379/0", "redis://xxxxx@h:6379/0"},
		{"redis://:pw@h", "redis://xxxxx@h"},
		{"redis://pw@h", "redis://xxxxx@h"},
		{"rediss://u:p@ss@h", "rediss://xxxxx@h"},
		{"redis://u:a/b@h", "redis://xxxxx@h"},
		{"redis://u/x:a@h", "redis://xxxxx@h"},
		{"redis://h:1?password=pw", "redis://h:1?..."},
		{"redis://u:pw@h:1?client_name=a", "redis://xxxxx@h:1?..."},
		{"u:pw@h:1", "xxxxx@h:1"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseNodes(t *testing.T) {
	opts, err := parseNodes(" redis://127.0.0.1:7001 , rediss://u:p%2Cw@h:7002/3 ,,")
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) != 2 {
		t.Fatalf("got %d nodes, want 2", len(opts))
	}
	a, b := opts[0], opts[1]
	if a.Addr != "127.0.0.1:7001" || a.TLSConfig != nil || b.Addr != "h:7002" || b.DB != 3 || b.Username != "u" || b.Password != "p,w" || b.TLSConfig == nil {
		t.Errorf("parsed %+v and %+v", a, b)
	}
	for _, o := range opts {
		if !o.ContextTimeoutEnabled || o.MaxRetries != -1 {
			t.Errorf("%s: ContextTimeoutEnabled %v, MaxRetries %d; want true, -1", o.Addr, o.ContextTimeoutEnabled, o.MaxRetries)
		}
	}
}

// FuzzParseNodesHidesPassword checks that no error about a node URL shows
// its password, whatever the password holds.
func FuzzParseNodesHidesPassword(f *testing.F) {
	for _, s := range []string{"secret", "a/b", "a#b", "a?b", "a@b", "a:b", "p%zz", "a b", "[::1]"} {
		f.Add(s, "h:1")
	}
	f.Fuzz(func(t *testing.T, password, hostport string) {
		for _, raw := range []string{
			"redis://user:" + password + "@" + hostport,
			"redis://" + password + "@" + hostport,
			"rediss://:" + password + "@" + hostport + "/x",
		} {
			// A password that is also part of the rest of the URL or of
			// the message's own words and punctuation, or too short to
			// tell apart, cannot be checked; nor can a URL with bytes
			// that messages quote as escapes.
			rest := strings.Replace(raw, password, "", 1)
			if len(password) < 4 || strings.Contains(rest, password) || strings.Contains(urlForm, password) || strings.Contains("xxxxx@?...", password) ||
				strings.ContainsAny(password, "()\" ") || !utf8.ValidString(raw) ||
				strings.ContainsFunc(raw, func(r rune) bool { return !strconv.IsPrint(r) }) {
				continue
			}
			_, err := parseNodes(raw)
			if err != nil && strings.Contains(err.Error(), password) {
				t.Errorf("parseNodes(%q): error shows the password: %v", raw, err)
			}
			if strings.Contains(redactURL(raw), password) {
				t.Errorf("redactURL(%q) = %q shows the password", raw, redactURL(raw))
			}
		}
	})
}
