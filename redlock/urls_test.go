package redlock_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/urltest"
	"github.com/quorumlock/redlock/redlock"
)

// NewFromURLs reaches a server without a password, one with requirepass
// and one with an ACL user, and Close closes the clients it built.
func TestNewFromURLs(t *testing.T) {
	t.Parallel()
	const password, aclPass = "s3cret,Pa55/word", "acl#S3cret@x"
	servers := redistest.StartT(t, 3, redistest.Options{})
	admin := func(s *redistest.Server, args ...any) {
		t.Helper()
		c := s.NewClient()
		defer func() { _ = c.Close() }()
		if err := c.Do(t.Context(), args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	admin(servers[1], "CONFIG", "SET", "requirepass", password)
	admin(servers[2], "ACL", "SETUSER", "locker", "on", ">"+aclPass, "~*", "&*", "+@all")
	admin(servers[2], "ACL", "SETUSER", "default", "off")
	urls := []string{
		"redis://" + servers[0].Addr + "/2?client_name=locks",
		"redis://:" + url(password) + "@" + servers[1].Addr,
		" redis://locker:" + url(aclPass) + "@" + servers[2].Addr + "/0 ",
	}
	l, err := redlock.NewFromURLs(urls, testOpts...)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := l.TryObtain(t.Context(), "urls")
	if err != nil {
		t.Fatal(err)
	}
	// Database 2 on the first server: the URL's path was used.
	c := servers[0].NewClient()
	defer func() { _ = c.Close() }()
	if n, err := c.Do(t.Context(), "SELECT", 2).Result(); err != nil || n != "OK" {
		t.Fatalf("SELECT 2: %v %v", n, err)
	}
	c2 := redis.NewClient(&redis.Options{Addr: servers[0].Addr, DB: 2})
	defer func() { _ = c2.Close() }()
	if v, err := c2.Get(t.Context(), "urls").Result(); err != nil || !strings.HasPrefix(v, lock.Token()) {
		t.Errorf("GET urls in db 2 = %q, %v; want the lock's token %q", v, err, lock.Token())
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	owned := redlock.OwnedClients(l)
	if len(owned) != 3 {
		t.Fatalf("%d owned clients, want 3", len(owned))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range owned {
		if err := c.(*redis.Client).Ping(t.Context()).Err(); !errors.Is(err, redis.ErrClosed) {
			t.Errorf("owned client %d after Close: Ping = %v, want %v", i, err, redis.ErrClosed)
		}
	}
}

// url percent-encodes a password for a URL's user information.
func url(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// A wrong password is an outage that says WRONGPASS, never the password.
func TestNewFromURLsWrongPassword(t *testing.T) {
	t.Parallel()
	const password, wrong = "s3cret-Pa55", "wr0ng-Pa55"
	servers := redistest.StartT(t, 1, redistest.Options{})
	c := servers[0].NewClient()
	err := c.ConfigSet(t.Context(), "requirepass", password).Err()
	_ = c.Close()
	if err != nil {
		t.Fatal(err)
	}
	l, err := redlock.NewFromURLs([]string{"redis://:" + wrong + "@" + servers[0].Addr}, testOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	_, err = l.TryObtain(t.Context(), "k")
	if !errors.Is(err, redlock.ErrMisconfigured) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("TryObtain = %v, want ErrMisconfigured with WRONGPASS", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Errorf("error shows the password: %v", err)
	}
}

// New's clients stay the caller's; a failed NewFromURLs builds nothing.
func TestNewFromURLsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		urls []string
		want string
	}{
		{"none", nil, "no URLs"},
		{"empty", []string{""}, "urls[0]: node URL : empty URL"},
		{"bad second", []string{"redis://h:1", "redis://h:2/x"}, "urls[1]: node URL redis://h:2/...: invalid database number"},
		{"same node twice", []string{"redis://localhost:1", "redis://127.0.0.1:1"}, "same node"},
		{"bad option", []string{"redis://h:1?frob=1"}, "unexpected option: frob"},
		{"bad cluster", []string{"redis://h:1", "redis+cluster://h:2,h:x"}, "urls[1]: node URL redis+cluster://xxxxx: host 2 of 2: the port is not a number"},
		{"same cluster twice", []string{"redis+cluster://h:1,h:2", "redis+cluster://h:3,h:2"}, "same node"},
		{"same sentinel group twice", []string{"redis+sentinel://s:1,s:2/m", "redis+sentinel://s:2/m"}, "same node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := redlock.NewFromURLs(tt.urls)
			if err == nil {
				_ = l.Close()
				t.Fatal("no error")
			}
			if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want ErrInvalid with %q", err, tt.want)
			}
		})
	}
	if _, err := redlock.NewFromURLs([]string{"redis://h:1"}, redlock.WithToken("t")); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("NewFromURLs with WithToken: %v, want ErrInvalid", err)
	}
	server := &redis.Options{Addr: "h:1"}
	for _, u := range []redlock.NodeURL{{}, {Server: server, Cluster: &redis.ClusterOptions{Addrs: []string{"h:2"}}}} {
		_, err := redlock.NewFromNodeURLs([]redlock.NodeURL{{Server: server}, u})
		if !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "urls[1]: a NodeURL has one of Server, Cluster and Sentinel set") {
			t.Errorf("NewFromNodeURLs with %+v: %v; want ErrInvalid naming urls[1]", u, err)
		}
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	o, err := redlock.ParseURL("rediss://u:p%2Cw%40x@example.com:7002/3?dial_timeout=2s&client_name=c&max_retries=5")
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "example.com:7002" || o.DB != 3 || o.Username != "u" || o.Password != "p,w@x" ||
		o.DialTimeout != 2*time.Second || o.ClientName != "c" {
		t.Errorf("parsed %+v", o)
	}
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "example.com" || o.TLSConfig.InsecureSkipVerify || o.TLSConfig.MinVersion < tls.VersionTLS12 {
		t.Errorf("TLS config %+v; want verification against example.com, TLS 1.2 or later", o.TLSConfig)
	}
	// Safe for locks whatever the query says.
	if !o.ContextTimeoutEnabled || o.MaxRetries != -1 {
		t.Errorf("ContextTimeoutEnabled %v, MaxRetries %d; want true, -1", o.ContextTimeoutEnabled, o.MaxRetries)
	}
	o, err = redlock.ParseURL("redis://[::1]")
	if err != nil || o.Addr != "[::1]:6379" || o.TLSConfig != nil || o.Password != "" {
		t.Errorf("redis://[::1]: %+v, %v", o, err)
	}
	o, err = redlock.ParseURL("rediss://h?skip_verify=true")
	if err != nil || o.TLSConfig == nil || !o.TLSConfig.InsecureSkipVerify {
		t.Errorf("skip_verify: %+v, %v", o, err)
	}

	bad := []struct{ in, want string }{
		{"127.0.0.1:6379", "node URL 127.0.0.1:6379: not a URL"},
		{"http://h:1", `node URL http://h:1: unsupported scheme "http"`},
		{"unix:///tmp/redis.sock", `unsupported scheme "unix"`},
		{"redis://127.0.0.1:port", "node URL redis://127.0.0.1:xxxxx: malformed URL: the port is not a number"},
		{"redis:///0", "missing host"},
		{"redis://h:1#x", "unexpected #fragment"},
		{"redis://h:1?frob=1", "node URL redis://h:1?...: unexpected option: frob"},
		{"redis://h:1/a/b", "node URL redis://h:1/...: invalid database number"},
		{"redis://h:1?dial_timeout=soon", "invalid dial_timeout duration"},
		{"://h", "not a redis:// or rediss:// URL"},
	}
	for _, tt := range bad {
		_, err := redlock.ParseURL(tt.in)
		var ue *redlock.URLError
		if !errors.Is(err, redlock.ErrInvalid) || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseURL(%q) = %v; want a one-line *URLError matching ErrInvalid with %q", tt.in, err, tt.want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"redis://h:6379", "redis://h:6379"},
		{"redis://h:6379/", "redis://h:6379/"},
		{"redis://[::1]:6379/2", "redis://[::1]:6379/2"},
		{"redis://u:pw@h:6379/0", "redis://xxxxx@h:6379/0"},
		{"redis://:pw@h", "redis://xxxxx@h"},
		{"redis://pw@h", "redis://xxxxx@h"},
		{"rediss://u:p@ss@h", "rediss://xxxxx@h"},
		{"redis://u:a/b@h", "redis://xxxxx@h"},
		{"redis://u/x:a@h", "redis://xxxxx@h"},
		{"redis://u:pw@h:port", "redis://xxxxx@h:port"},
		{"redis://h:1?password=pw", "redis://h:1?..."},
		{"redis://u:pw@h:1?client_name=a", "redis://xxxxx@h:1?..."},
		{"redis://h:1/?password=pw@x", "redis://xxxxx"},
		{"redis://u:p?w@h:1", "redis://xxxxx"},
		{"redis://u:p#w@h:1", "redis://xxxxx"},
		{"redis://:secret", "redis://:xxxxx"},
		{"redis://u:sec:ret/0", "redis://u:xxxxx"},
		{"redis://:/0000", "redis://:xxxxx"},
		{"redis://u:sec/ret", "redis://u:xxxxx"},
		{"redis://u:/secret", "redis://u:/..."},
		{"redis://h:1/abc", "redis://h:1/..."},
		{"u:pw@h:1", "xxxxx@h:1"},
		{"redis+cluster://h:1,h:2,[::1]:3", "redis+cluster://h:1,h:2,[::1]:3"},
		{"redis+cluster://u:pw@h:1,h:2?x=1", "redis+cluster://xxxxx@h:1,h:2?..."},
		{"redis+cluster://u:pw@h:1,h:port", "redis+cluster://xxxxx@xxxxx"},
		{"redis+cluster://u:pw@h:1,:1234", "redis+cluster://xxxxx@xxxxx"},
		{"redis+cluster://:pass,word", "redis+cluster://xxxxx"},
		{"redis+cluster://h:1,u:pass,word/0", "redis+cluster://xxxxx"},
		{"redis://:pa,ss", "redis://xxxxx"},
		{"redis://:1234", "redis://:xxxxx"},
		{"redis+cluster://h:1,:1234", "redis+cluster://xxxxx"},
		{"redis+sentinel://s:1,s:2/master/2", "redis+sentinel://s:1,s:2/..."},
		{"redis+sentinel://s:1,s:2/master?sentinel_password=pw", "redis+sentinel://s:1,s:2/...?..."},
		{"", ""},
	}
	for _, tt := range tests {
		if got := redlock.RedactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// No error about a URL shows its password, whatever the password holds
// unencoded, and wherever it ends up in a URL that no longer parses.
func TestParseURLHidesPassword(t *testing.T) {
	t.Parallel()
	passwords := []string{
		"Pa55w0rd", "Pa55,w0rd", "Pa55#w0rd", "Pa55/w0rd", "Pa55?w0rd", "Pa55@w0rd", "Pa55:w0rd",
		"Pa55%w0rd", "Pa55%zzw0rd", "Pa55 w0rd", "Pa55[w0rd", "Pa55]w0rd", "/Pa55w0rd", "Pa55w0rd#",
		"Pa55w0rd?", "Pa55w0rd@", "Pa55\x00w0rd", "Pa55\nw0rd", "Pä55wörd", "Pa55/w0rd?x=1#y",
	}
	shapes := []string{
		"redis://user:%s@h:1", "redis://:%s@h:1", "redis://%s@h:1", "rediss://user:%s@h:1/0",
		"redis://user:%s@h:1?dial_timeout=1s", "redis://:%s", "redis://user:%s", "redis://user:%s/0",
		"redis://:%s@", "user:%s@h:1", "redis://user:%s@h:port", "http://user:%s@h:1", "redis://h:1/?password=%s",
	}
	for _, pw := range passwords {
		for _, shape := range shapes {
			raw := fmt.Sprintf(shape, pw)
			_, err := redlock.ParseURL(raw)
			if err == nil {
				continue
			}
			msg := err.Error()
			// Each half of the password: a misplaced one may be split.
			for _, part := range []string{pw, pw[:4], pw[len(pw)-4:]} {
				if strings.Contains(msg, part) {
					t.Errorf("ParseURL(%q): error shows %q of the password: %v", raw, part, msg)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("ParseURL(%q): error has several lines: %q", raw, msg)
			}
		}
	}
	// And in NewFromURLs's errors, a bad URL among good ones.
	_, err := redlock.NewFromURLs([]string{"redis://h:1", "redis://u:Pa55,w0rd@h:2", "redis://u:Pa55#w0rd@h:3"})
	if err == nil || strings.Contains(err.Error(), "Pa55") || strings.Contains(err.Error(), "w0rd") {
		t.Errorf("NewFromURLs: %v; want an error without the password", err)
	}
}

// FuzzParseURLHidesPassword checks that no error about a node URL shows
// its password, whatever the password holds.
func FuzzParseURLHidesPassword(f *testing.F) {
	for _, s := range urltest.Passwords {
		f.Add(s, "h:1")
	}
	f.Fuzz(func(t *testing.T, password, hostport string) {
		for _, raw := range urltest.URLs(password, hostport) {
			if !urltest.Checkable(raw, password, redlock.URLForm, "node URL xxxxx@?...") {
				continue
			}
			_, err := redlock.ParseURL(raw)
			if err != nil && strings.Contains(err.Error(), password) {
				t.Errorf("ParseURL(%q): error shows the password: %v", raw, err)
			}
		}
	})
}

// A rediss:// URL reaches a TLS server when its certificate is trusted
// (here: skip_verify), and fails as an outage when it is not, and as a
// mistake when a redis:// URL names the TLS port.
func TestNewFromURLsTLS(t *testing.T) {
	t.Parallel()
	addr := redistest.StartTLST(t, 1)[0].TLSAddr
	tests := []struct {
		url  string
		ok   bool
		want error
	}{
		{"rediss://" + addr + "?skip_verify=true", true, nil},
		{"rediss://" + addr, false, redlock.ErrNoQuorum},     // self-signed: not trusted
		{"redis://" + addr, false, redlock.ErrMisconfigured}, // plain text to a TLS port: a mistake, not an outage
	}
	for _, tt := range tests {
		l, err := redlock.NewFromURLs([]string{tt.url}, redlock.WithNodeTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		lock, err := l.TryObtain(t.Context(), "tls")
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: %v", tt.url, err)
		case tt.ok:
			if err := lock.Release(t.Context()); err != nil {
				t.Error(err)
			}
		case !errors.Is(err, tt.want):
			t.Errorf("%s: TryObtain = %v, want %v", tt.url, err, tt.want)
		}
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}
}
