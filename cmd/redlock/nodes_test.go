package main

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
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
	// A plain host:port is redis://host:port; what is neither is refused
	// without showing it.
	urls, err = parseNodes("127.0.0.1:7001, redis-2.example:7002,[::1]:7003")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"redis://127.0.0.1:7001", "redis://redis-2.example:7002", "redis://[::1]:7003"}; strings.Join(urls, " ") != strings.Join(want, " ") {
		t.Errorf("parseNodes of host:port = %q, want %q", urls, want)
	}
	for _, tt := range []struct{ list, want string }{
		{"redis://:pa,ss@h:1", "item 2 of the node list is neither a URL nor host:port"},
		{"h:1,h:99999x", "item 2 of the node list is neither a URL nor host:port"},
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
	for _, s := range urltest.Passwords {
		f.Add(s, "h:1")
	}
	f.Fuzz(func(t *testing.T, password, hostport string) {
		// The URLs alone, and one after a good URL in a list.
		raws := append(urltest.URLs(password, hostport), "redis://h:1,redis://user:"+password+"@"+hostport)
		for _, raw := range raws {
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

// The TLS flags' former names are refused with the new name; --key, which
// users took for the lock's KEY, also says where KEY goes. --help shows
// only the new names.
func TestRenamedTLSFlags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--nodes", "127.0.0.1:1", "--key", "mylock", "--", "echo", "hi"}, "redlock run: --key is now --tls-key; the lock's name is the KEY argument, not a flag"},
		{[]string{"run", "--nodes", "127.0.0.1:1", "--cacert", "ca.pem", "k", "--", "true"}, "redlock run: --cacert is now --tls-ca\n"},
		{[]string{"inspect", "--cert", "c.pem", "k"}, "redlock inspect: --cert is now --tls-cert\n"},
		{[]string{"doctor", "--key"}, "redlock doctor: --key is now --tls-key"},
	} {
		code, stdout, stderr := redlockRun(t, nil, tt.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("redlock %s: code %d, stdout %q; want %d and %q\n%s", strings.Join(tt.args, " "), code, stdout, exitUsage, tt.want, stderr)
		}
	}
	for name := range commands {
		_, stdout, _ := redlockRun(t, nil, name, "--help")
		for old := range renamedFlags {
			if strings.Contains(stdout, "--"+old+" ") || strings.Contains(stdout, "--"+old+"\n") {
				t.Errorf("redlock %s --help shows the former flag --%s", name, old)
			}
		}
	}
}

// --nodes takes host:port as redis://host:port: a run against plain
// addresses works.
func TestNodesHostPort(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr)
	}
	code, stdout, stderr := redlockRun(t, nil, "run", "--nodes", strings.Join(addrs, ","), "k", "--", "echo", "ran")
	if code != 0 || stdout != "ran" {
		t.Errorf("run --nodes host:port,...: code %d, stdout %q\n%s", code, stdout, stderr)
	}
}
