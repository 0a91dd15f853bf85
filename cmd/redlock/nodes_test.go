package main

import (
	"strconv"
	"strings"
	"syscall"
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
	// A host:port right after a cluster's or a group's hosts is one more
	// of them; a URL, or the path or query that ends the host list, ends
	// the node.
	for _, tt := range []struct {
		list string
		want []string
	}{
		{"redis://a:1, b:2,redis+cluster://c:3, d:4,e:5 ,redis://f:6",
			[]string{"redis://a:1", "redis://b:2", "redis+cluster://c:3,d:4,e:5", "redis://f:6"}},
		{"rediss+cluster://u:p%2Cw@c:3,d:4?dial_timeout=1s,e:5",
			[]string{"rediss+cluster://u:p%2Cw@c:3,d:4?dial_timeout=1s", "redis://e:5"}},
		{"redis+sentinel://s:1,t:2/m,u:3,redis+cluster://c:3,,d:4",
			[]string{"redis+sentinel://s:1,t:2/m", "redis://u:3", "redis+cluster://c:3,d:4"}},
		{"redis+sentinel://s:1,t:2,u:3/m/2", []string{"redis+sentinel://s:1,t:2,u:3/m/2"}},
	} {
		urls, err := parseNodes(tt.list)
		if err != nil || strings.Join(urls, " ") != strings.Join(tt.want, " ") {
			t.Errorf("parseNodes(%q) = %q, %v; want %q", tt.list, urls, err, tt.want)
		}
	}
	for _, tt := range []struct{ list, want string }{
		{"redis://:pa,ss@h:1", "item 2 of the node list is neither a URL nor host:port"},
		{"h:1,h:99999x", "item 2 of the node list is neither a URL nor host:port"},
		{"redis://h:1, redis://h:2/x", "node 2 (redis://h:2/...): invalid database number"},
		{"redis://u:pw@h:port", "node 1 (redis://xxxxx@h:port): malformed URL"},
		{" , ", "no nodes"},
		{"redis://h:1,redis+cluster://c:1,c:x", "node 2 (redis+cluster://xxxxx): host 2 of 2: the port is not a number"},
		{"redis+cluster://c:1/0,h:2", "node 1 (redis+cluster://c:1/0): unexpected path"},
		{"redis+cluster://c:1?x=1,h:2:3", "item 2 of the node list is neither a URL nor host:port"},
		{"redis+sentinel://s:1,redis://h:2", "node 1 (redis+sentinel://s:1): missing master name"},
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
		// The URLs alone, and after a good URL in a list.
		raws := append(urltest.URLs(password, hostport),
			"redis://h:1,redis://user:"+password+"@"+hostport,
			"redis+cluster://user:"+password+"@"+hostport+",h:2")
		if !strings.Contains(password, "@") {
			// (With an "@", the password's tail is the URL's host.)
			raws = append(raws, "redis://h:1,redis+cluster://h:2,:"+password+","+hostport)
		}
		for _, raw := range raws {
			if !urltest.Checkable(raw, password, redlock.URLForm, redlock.ClusterURLForm, redlock.SentinelURLForm,
				"node URL xxxxx@?.../... of the list is not shown: it may hold a password",
				"redis[s]://, redis[s]+cluster:// or redis[s]+sentinel:// (docs/cli.md#nodes)") {
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

// --nodes takes clusters mixed with standalone masters: run and hold
// take and release a lock on two servers and a cluster, whose seeds
// follow its URL in the list.
func TestNodesCluster(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, redistest.Options{})
	c := redistest.StartClusterT(t, redistest.ClusterOptions{})
	// The cluster's seeds, then a standalone master's URL and a plain
	// host:port, which ends no host list: a master of its own.
	nodes := "redis+cluster://" + strings.Join(c.Addrs(), ",") + ",redis://" + servers[0].Addr + "," + servers[1].Addr
	code, stdout, stderr := redlockRun(t, nil, "run", "--nodes", nodes, "--fencing", "k", "--", "sh", "-c", "echo ran $REDLOCK_FENCE")
	if fence, err := strconv.ParseUint(strings.TrimPrefix(stdout, "ran "), 10, 64); code != 0 || err != nil || fence == 0 {
		t.Errorf("run on a cluster and two servers: code %d, stdout %q, want a fencing token\n%s", code, stdout, stderr)
	}
	// While hold holds a lock, it is on the master of its key's slot.
	// With one standalone server down, the lock needs the cluster's
	// vote: hold's grant, and its release, then wait for it (a majority
	// of three otherwise returns without the slowest node's answer).
	if err := servers[1].Kill(); err != nil {
		t.Fatal(err)
	}
	p := start(t, []string{envNodes + "=" + nodes}, "hold", "held-key")
	p.stdout.await(t, "0")
	owner, err := c.KeyOwner(t.Context(), "held-key")
	if err != nil {
		t.Fatal(err)
	}
	cl := owner.NewClient()
	defer func() { _ = cl.Close() }()
	if n, err := cl.Exists(t.Context(), "held-key").Result(); err != nil || n != 1 {
		t.Errorf("held-key on its slot's master: EXISTS = %d, %v; want 1", n, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.expect(0)
	if n, err := cl.Exists(t.Context(), "held-key").Result(); err != nil || n != 0 {
		t.Errorf("held-key after hold ended: EXISTS = %d, %v; want 0", n, err)
	}
}

// A Sentinel group's URL names its sentinels and the group: run locks on
// a quorum of the group and two standalone masters.
func TestNodesSentinel(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 2, redistest.Options{})
	g := redistest.StartSentinelGroupT(t, redistest.SentinelOptions{})
	nodes := "redis+sentinel://" + strings.Join(g.SentinelAddrs(), ",") + "/" + g.Name + ",redis://" + servers[0].Addr + ",redis://" + servers[1].Addr
	code, _, stderr := redlockRun(t, nil, "run", "--nodes", nodes, "sentinel-key", "--", "true")
	if code != 0 {
		t.Fatalf("run on a Sentinel group and two masters: code %d\n%s", code, stderr)
	}
}
