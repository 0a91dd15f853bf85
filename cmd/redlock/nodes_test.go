package main

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/urltest"
	"github.com/quorumlock/redlock/redlock"
)

func TestParseNodes(t *testing.T) {
	urls, err := parseNodes(" redis://127.0.0.1:7001 , rediss://u:p%2Cw@h:7002/3 ,,")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"redis://127.0.0.1:7001", "rediss://u:p%2Cw@h:7002/3"}; strings.Join(urls, " ") != strings.Join(want, " ") {
		t.Errorf("parseNodes = %q, want %q", urls, want)
	}
	for _, tt := range []struct{ list, want string }{
		{"redis://h:1, redis://h:2/x", "node 2 (redis://h:2/...): invalid database number"},
		{"redis://u:pw@h:port", "node 1 (redis://xxxxx@h:port): malformed URL"},
		{" , ", "no nodes"},
	} {
		if _, err := parseNodes(tt.list); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("parseNodes(%q) = %v, want an error starting %q", tt.list, err, tt.want)
		}
	}
}

// FuzzParseNodesHidesPassword checks that no error about a node URL shows
// its password, whatever the password holds.
func FuzzParseNodesHidesPassword(f *testing.F) {
	for _, s := range []string{"secret", "a/b", "a#b", "a?b", "a@b", "a:b", "p%zz", "a b", "[::1]", "a,b"} {
		f.Add(s, "h:1")
	}
	f.Fuzz(func(t *testing.T, password, hostport string) {
		for _, raw := range []string{
			"redis://user:" + password + "@" + hostport,
			"redis://" + password + "@" + hostport,
			"rediss://:" + password + "@" + hostport + "/x",
			"redis://h:1,redis://user:" + password + "@" + hostport,
		} {
			if !urltest.Checkable(raw, password, redlock.URLForm,
				"node URL xxxxx@?.../... of the list is not shown: it may hold a password") {
				continue
			}
			if _, err := parseNodes(raw); err != nil && strings.Contains(err.Error(), password) {
				t.Errorf("parseNodes(%q): error shows the password: %v", raw, err)
			}
		}
	})
}
