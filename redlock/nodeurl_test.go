package redlock_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/urltest"
	"github.com/quorumlock/redlock/redlock"
)

// A cluster URL lists its seeds; every setting of the query and the user
// information is the cluster's.
func TestParseNodeURLCluster(t *testing.T) {
	t.Parallel()
	u, err := redlock.ParseNodeURL(" rediss+cluster://u:p%2Cw%40x@c1.example:7000,c2.example:7001,[::1]:7002?dial_timeout=2s&client_name=c&max_retries=5 ")
	if err != nil {
		t.Fatal(err)
	}
	o := u.Cluster
	if o == nil || u.Server != nil || u.Sentinel != nil {
		t.Fatalf("parsed %+v; want only Cluster set", u)
	}
	if want := []string{"c1.example:7000", "c2.example:7001", "[::1]:7002"}; !slices.Equal(o.Addrs, want) {
		t.Errorf("Addrs %q, want %q", o.Addrs, want)
	}
	if o.Username != "u" || o.Password != "p,w@x" || o.DialTimeout != 2*time.Second || o.ClientName != "c" {
		t.Errorf("parsed %+v", o)
	}
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "c1.example" || o.TLSConfig.InsecureSkipVerify || o.TLSConfig.MinVersion < tls.VersionTLS12 {
		t.Errorf("TLS config %+v; want verification against c1.example, TLS 1.2 or later", o.TLSConfig)
	}
	if !o.ContextTimeoutEnabled || o.MaxRetries != -1 {
		t.Errorf("ContextTimeoutEnabled %v, MaxRetries %d; want true, -1", o.ContextTimeoutEnabled, o.MaxRetries)
	}
	u, err = redlock.ParseNodeURL("redis+cluster://h/")
	if err != nil || u.Cluster == nil || !slices.Equal(u.Cluster.Addrs, []string{"h:6379"}) || u.Cluster.TLSConfig != nil {
		t.Errorf("redis+cluster://h/: %+v, %v; want one seed h:6379, no TLS", u.Cluster, err)
	}
}

// A Sentinel group URL lists its sentinels (port 26379 by default) and
// names its master in the path; the user information is the master's,
// the sentinels' own credentials are query options.
func TestParseNodeURLSentinel(t *testing.T) {
	t.Parallel()
	u, err := redlock.ParseNodeURL("rediss+sentinel://:pw@s1,s2:26380/my%2Fmaster/3?sentinel_username=su&sentinel_password=sp%26x&skip_verify=true&dial_timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	o := u.Sentinel
	if o == nil || u.Server != nil || u.Cluster != nil {
		t.Fatalf("parsed %+v; want only Sentinel set", u)
	}
	if want := []string{"s1:26379", "s2:26380"}; !slices.Equal(o.SentinelAddrs, want) {
		t.Errorf("SentinelAddrs %q, want %q", o.SentinelAddrs, want)
	}
	if o.MasterName != "my/master" || o.DB != 3 || o.Password != "pw" || o.Username != "" ||
		o.SentinelUsername != "su" || o.SentinelPassword != "sp&x" || o.DialTimeout != time.Second {
		t.Errorf("parsed %+v", o)
	}
	if o.TLSConfig == nil || !o.TLSConfig.InsecureSkipVerify || !o.ContextTimeoutEnabled || o.MaxRetries != -1 {
		t.Errorf("TLS %+v, ContextTimeoutEnabled %v, MaxRetries %d", o.TLSConfig, o.ContextTimeoutEnabled, o.MaxRetries)
	}
	u, err = redlock.ParseNodeURL("redis+sentinel://[::1]/m")
	if err != nil || u.Sentinel == nil || u.Sentinel.MasterName != "m" || u.Sentinel.DB != 0 ||
		!slices.Equal(u.Sentinel.SentinelAddrs, []string{"[::1]:26379"}) || u.Sentinel.TLSConfig != nil {
		t.Errorf("redis+sentinel://[::1]/m: %+v, %v", u.Sentinel, err)
	}
}

// A redis:// URL is a standalone master's, as ParseURL parses it; ParseURL
// points a cluster's or a group's URL to ParseNodeURL.
func TestParseNodeURLServer(t *testing.T) {
	t.Parallel()
	u, err := redlock.ParseNodeURL("redis://h:1/2?client_name=x")
	if err != nil || u.Server == nil || u.Cluster != nil || u.Sentinel != nil ||
		u.Server.Addr != "h:1" || u.Server.DB != 2 || u.Server.ClientName != "x" || u.Server.MaxRetries != -1 {
		t.Errorf("redis://h:1/2: %+v, %v", u, err)
	}
	for _, raw := range []string{"redis+cluster://h:1", "rediss+sentinel://h:1/m"} {
		_, err := redlock.ParseURL(raw)
		if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "ParseNodeURL takes every kind") {
			t.Errorf("ParseURL(%q) = %v; want ErrInvalid pointing to ParseNodeURL", raw, err)
		}
	}
}

func TestParseNodeURLErrors(t *testing.T) {
	t.Parallel()
	bad := []struct{ in, want string }{
		{"", "node URL : empty URL"},
		{"h:1", "node URL h:1: not a URL"},
		{"http://h:1", `unsupported scheme "http": want redis[s]://, redis[s]+cluster:// or redis[s]+sentinel://`},
		{"redis+unix://h", `unsupported scheme "redis+unix"`},
		{"://h", "not a node URL"},
		{"redis://h:1/x", "node URL redis://h:1/...: invalid database number"},
		{"redis+cluster://", "node URL redis+cluster://: missing host: want " + redlock.ClusterURLForm},
		{"redis+cluster://u:p@", "node URL redis+cluster://xxxxx@: missing host"},
		{"redis+cluster://h:1,,h:3", "node URL redis+cluster://h:1,,h:3: host 2 of 3: missing host"},
		{"redis+cluster://h:1,h:99999", "host 2 of 2: the port is not a number from 1 to 65535"},
		{"redis+cluster://h:0", "node URL redis+cluster://h:0: the port is not a number from 1 to 65535"},
		{"redis+cluster://h:", "the port is not a number"},
		{"redis+cluster://h:1,h:x", "node URL redis+cluster://xxxxx: host 2 of 2: the port is not a number"},
		{"redis+cluster://h:1,h%20x:2", "host 2 of 2: invalid host"},
		{"redis+cluster://h:1,::1:2", "host 2 of 2: the port is not a number"},
		{"redis+cluster://h:1/0", "node URL redis+cluster://h:1/0: unexpected path: a Redis Cluster has no databases to choose"},
		{"redis+cluster://h:1?db=2", "node URL redis+cluster://h:1?...: unexpected db option"},
		{"redis+cluster://h:1?frob=1", "unexpected option: frob"},
		{"redis+cluster://h:1,h:2#x", "unexpected #fragment: want " + redlock.ClusterURLForm},
		{"redis+cluster://u:a/b@h:1", "node URL redis+cluster://xxxxx@h:1: malformed URL: percent-encode / ? #"},
		{"redis+sentinel://s:1", "missing master name: the path must be /<master>[/<db>]"},
		{"redis+sentinel://s:1/", "missing master name"},
		{"redis+sentinel://s:1/m%zz", "missing master name"},
		{"redis+sentinel://s:1/m/x", "node URL redis+sentinel://s:1/...: invalid database number: the path must be /<master>[/<number>]"},
		{"redis+sentinel://s:1/m/", "invalid database number"},
		{"redis+sentinel://s:1/m?sentinel_password=%zz", "malformed query"},
		{"redis+sentinel://s:1/m?dial_timeout=soon", "invalid dial_timeout duration"},
		{"redis+sentinel://s:1/m?sentinel_password=a&b", "invalid query option (not shown: the query holds a password"},
		{"redis+cluster://h:1?password=a&b", "invalid query option (not shown: the query holds a password"},
	}
	for _, tt := range bad {
		_, err := redlock.ParseNodeURL(tt.in)
		var ue *redlock.URLError
		if !errors.Is(err, redlock.ErrInvalid) || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseNodeURL(%q) = %v; want a one-line *URLError matching ErrInvalid with %q", tt.in, err, tt.want)
		}
	}
}

// No error about a cluster's or a group's URL shows its password, whatever
// the password holds unencoded and wherever it ends up.
func TestParseNodeURLHidesPassword(t *testing.T) {
	t.Parallel()
	passwords := []string{
		"Pa55w0rd", "Pa55,w0rd", "Pa55#w0rd", "Pa55/w0rd", "Pa55?w0rd", "Pa55@w0rd", "Pa55:w0rd", "Pa55&w0rd",
		"Pa55%w0rd", "Pa55%zzw0rd", "Pa55 w0rd", "Pa55[w0rd", "Pa55]w0rd", "/Pa55w0rd", "Pa55w0rd#",
		"Pa55w0rd?", "Pa55w0rd@", "Pa55\nw0rd", "Pä55wörd", "Pa55/w0rd?x=1#y", "Pa55=w0rd", "Pa55+w0rd",
	}
	shapes := []string{
		"redis+cluster://user:%s@h:1,h:2", "rediss+cluster://:%s@h:1", "redis+cluster://%s@h:1,h:2",
		"redis+cluster://:%s", "redis+cluster://h:1,:%s", "redis+cluster://user:%s", "redis+cluster://user:%s,h:1",
		"redis+cluster://user:%s/0", "redis+cluster://u:%s@h:1/x", "redis+cluster://h:1?password=%s",
		"redis+sentinel://user:%s@s:1/m", "redis+sentinel://:%s/m", "redis+sentinel://s:1,:%s/m",
		"redis+sentinel://s:1/m?sentinel_password=%s", "rediss+sentinel://s:1/m?sentinel_password=%s&dial_timeout=1s",
		"redis+sentinel://s:1/m?dial_timeout=1s&sentinel_password=%s", "redis+sentinel://u:%s@s:1/m/x",
	}
	for _, pw := range passwords {
		for _, shape := range shapes {
			if strings.Contains(pw, "@") && !strings.Contains(shape, "@") {
				// Its "@" makes the password's tail the host of a
				// well-formed URL.
				continue
			}
			raw := fmt.Sprintf(shape, pw)
			_, err := redlock.ParseNodeURL(raw)
			if err == nil {
				continue
			}
			msg := err.Error()
			for _, part := range []string{pw, pw[:4], pw[len(pw)-4:]} {
				if strings.Contains(msg, part) {
					t.Errorf("ParseNodeURL(%q): error shows %q of the password: %v", raw, part, msg)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("ParseNodeURL(%q): error has several lines: %q", raw, msg)
			}
		}
	}
}

// FuzzParseNodeURLHidesPassword checks that no error about a cluster's or
// a group's URL shows its password, whatever the password holds.
func FuzzParseNodeURLHidesPassword(f *testing.F) {
	for _, s := range []string{"secret", "a/b", "a#b", "a?b", "a@b", "a:b", "p%zz", "a b", "[::1]", "a,b", "a&b"} {
		f.Add(s, "h:1,h:2")
	}
	f.Add("0000", "0") // a password of digits after no host reads as a port
	f.Add(",000", "0")
	f.Add("0000", "@")
	f.Fuzz(func(t *testing.T, password, hosts string) {
		raws := []string{
			"redis+cluster://user:" + password + "@" + hosts,
			"rediss+sentinel://:" + password + "@" + hosts + "/m/x",
			"redis+sentinel://" + hosts + "/m?sentinel_password=" + password,
		}
		if !strings.Contains(password, "@") && !strings.ContainsAny(hosts, "?#") {
			// (With an "@", the password's tail is the URL's host; after
			// a ? or #, the password is in the query, where its user
			// put it.)
			raws = append(raws, "redis+cluster://"+hosts+",:"+password)
		}
		for _, raw := range raws {
			if !urltest.Checkable(raw, password, redlock.URLForm, redlock.ClusterURLForm, redlock.SentinelURLForm,
				"node URL xxxxx@?.../... redis[s]://, redis[s]+cluster:// or redis[s]+sentinel:// (docs/cli.md#nodes) sentinel_password") {
				continue
			}
			_, err := redlock.ParseNodeURL(raw)
			if err != nil && strings.Contains(err.Error(), password) {
				t.Errorf("ParseNodeURL(%q): error shows the password: %v", raw, err)
			}
		}
	})
}
