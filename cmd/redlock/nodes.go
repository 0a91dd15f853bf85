package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// defaultNodeTimeout is higher than the library's: a command-line run pays
// for a fresh connection (and a TLS handshake with rediss://) on its first
// call to each node.
const defaultNodeTimeout = 500 * time.Millisecond

// nodeFlags are the flags every command has: where the nodes are.
type nodeFlags struct {
	nodes         string
	nodeTimeout   time.Duration
	cacert        string
	certFile, key string
}

// renamedFlags are the TLS flags' former names, by their new ones. The old
// names are refused with a hint: --key (the TLS key) was taken for the
// lock's KEY, which is an argument.
var renamedFlags = map[string]string{"cacert": "tls-ca", "cert": "tls-cert", "key": "tls-key"}

// renamedFlag is a former flag name: setting it is an error naming the new
// one. --help does not show it.
type renamedFlag struct{ old, new string }

func (f renamedFlag) String() string { return "" }
func (f renamedFlag) Set(string) error {
	hint := ""
	if f.old == "key" {
		hint = "; the lock's name is the KEY argument, not a flag"
	}
	return fmt.Errorf("--%s is now --%s%s", f.old, f.new, hint)
}

func (n *nodeFlags) register(fs *flagSet) {
	// The default is read from the environment after parsing, never shown
	// as the flag's default: it may hold passwords.
	fs.StringVar(&n.nodes, "nodes", "", "comma-separated node `URLs`: standalone masters, clusters, Sentinel groups:\n"+
		"redis[s]://[[user]:password@]host[:port][/db][?option=value...]\n"+
		"(or host:port for redis://host:port) for a standalone master,\n"+
		"redis[s]+cluster://[[user]:password@]host[:port][,host[:port]...][?...]\n"+
		"for a Redis Cluster (a host:port after its hosts is one more of them),\n"+
		"redis[s]+sentinel://[[user]:password@]host[:port][,host[:port]...]/master\n"+
		"for a Sentinel group (its sentinels, and the group's name);\n"+
		"percent-encode , / ? # @ in a password (default $"+envNodes+")")
	fs.durationVar(&n.nodeTimeout, "node-timeout", defaultNodeTimeout, "bound on each call to one node; a slower node counts\nas failed")
	fs.StringVar(&n.cacert, "tls-ca", "", "PEM `FILE` of the certificate authorities that rediss:// nodes'\n"+
		"certificates must chain to, instead of the system's")
	fs.StringVar(&n.certFile, "tls-cert", "", "PEM `FILE` of the client certificate to present to rediss://\nnodes (with --tls-key)")
	fs.StringVar(&n.key, "tls-key", "", "PEM `FILE` of the private key of --tls-cert")
	for old, renamed := range renamedFlags {
		fs.Var(renamedFlag{old, renamed}, old, "")
	}
}

// exitNoInput is the exit code when a file that a flag names cannot be
// used (EX_NOINPUT).
const exitNoInput = 66

// tlsConfig returns the TLS settings of --tls-ca, --tls-cert and --tls-key, nil
// when none is given. ok is false when redlock should exit with code; the
// error is reported then.
func (a *app) tlsConfig(fs *flagSet, n *nodeFlags) (cfg *tls.Config, code int, ok bool) {
	if n.cacert == "" && n.certFile == "" && n.key == "" {
		return nil, 0, true
	}
	if (n.certFile == "") != (n.key == "") {
		return nil, a.usageError(fs.cmd, "--tls-cert and --tls-key go together"), false
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	if n.cacert != "" {
		pem, err := os.ReadFile(n.cacert)
		if err != nil {
			a.errorf(fs.cmd, "--tls-ca: %v", err)
			return nil, exitNoInput, false
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			a.errorf(fs.cmd, "--tls-ca %s: no PEM certificate in it", n.cacert)
			return nil, exitNoInput, false
		}
	}
	if n.certFile != "" {
		cert, err := tls.LoadX509KeyPair(n.certFile, n.key)
		if err != nil {
			a.errorf(fs.cmd, "--tls-cert %s, --tls-key %s: %v", n.certFile, n.key, err)
			return nil, exitNoInput, false
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, 0, true
}

// locker connects to the nodes and returns a Locker over them with opts as
// its defaults, and a function that closes the Locker (and with it the
// clients it built). ok is false when redlock should exit with code; the
// error is reported then.
func (a *app) locker(fs *flagSet, n *nodeFlags, opts ...redlock.Option) (l *redlock.Locker, closeAll func(), code int, ok bool) {
	nodes, code, ok := a.parsedNodes(fs, n)
	if !ok {
		return nil, nil, code, false
	}
	// The library's warnings are for the commands that take a lock, which
	// give their logger in opts; the others show the nodes' state anyway.
	opts = append([]redlock.Option{redlock.WithNodeTimeout(n.nodeTimeout), redlock.WithLogger(quietLogger())}, opts...)
	l, err := redlock.NewFromNodeURLs(nodes, opts...)
	if err != nil {
		return nil, nil, a.fail(fs.cmd, "nodes", err), false
	}
	return l, func() {
		// Close waits for background clean-up and cannot fail.
		_ = l.Close()
	}, 0, true
}

// parsedNodes returns the nodes (--nodes, or the environment), parsed,
// every TLS node with the TLS flags' settings. ok is false when redlock
// should exit with code; the error is reported then.
func (a *app) parsedNodes(fs *flagSet, n *nodeFlags) (nodes []redlock.NodeURL, code int, ok bool) {
	urls, tlsCfg, code, ok := a.nodeURLs(fs, n)
	if !ok {
		return nil, code, false
	}
	nodes = make([]redlock.NodeURL, len(urls))
	for i, u := range urls {
		node, err := redlock.ParseNodeURL(u) // checked by parseNodes
		if err != nil {
			return nil, a.usageError(fs.cmd, err.Error()), false
		}
		nodes[i] = node
	}
	if tlsCfg != nil && withTLS(nodes, tlsCfg) == 0 {
		return nil, a.usageError(fs.cmd, errTLSFlags), false
	}
	return nodes, 0, true
}

// errTLSFlags is the usage error of TLS flags given with no TLS node.
const errTLSFlags = "--tls-ca, --tls-cert and --tls-key are for rediss:// nodes (and rediss+cluster://, rediss+sentinel://), and none is given"

// withTLS gives every TLS node of nodes the TLS settings of the flags,
// each keeping the server name to verify and skip_verify of its URL, and
// returns how many it changed.
func withTLS(nodes []redlock.NodeURL, tlsCfg *tls.Config) int {
	changed := 0
	for _, u := range nodes {
		var cfg **tls.Config
		switch {
		case u.Server != nil:
			cfg = &u.Server.TLSConfig
		case u.Cluster != nil:
			cfg = &u.Cluster.TLSConfig
		case u.Sentinel != nil:
			cfg = &u.Sentinel.TLSConfig
		}
		if cfg == nil || *cfg == nil {
			continue
		}
		c := tlsCfg.Clone()
		c.ServerName = (*cfg).ServerName
		c.InsecureSkipVerify = (*cfg).InsecureSkipVerify
		*cfg = c
		changed++
	}
	return changed
}

// nodeURLs returns the nodes' URLs (--nodes, or the environment) and the
// TLS settings of --tls-ca, --tls-cert and --tls-key (nil when none is given),
// checked, with --node-timeout. ok is false when redlock should exit with
// code; the error is reported then.
func (a *app) nodeURLs(fs *flagSet, n *nodeFlags) (urls []string, tlsCfg *tls.Config, code int, ok bool) {
	list := n.nodes
	if list == "" {
		list = a.getenv(envNodes)
	}
	if strings.TrimSpace(list) == "" {
		return nil, nil, a.usageError(fs.cmd, "no nodes: give --nodes or set "+envNodes), false
	}
	if n.nodeTimeout <= 0 {
		return nil, nil, a.usageError(fs.cmd, fmt.Sprintf("--node-timeout %v must be positive", n.nodeTimeout)), false
	}
	urls, err := parseNodes(list)
	if err != nil {
		return nil, nil, a.usageError(fs.cmd, err.Error()), false
	}
	tlsCfg, code, ok = a.tlsConfig(fs, n)
	if !ok {
		return nil, nil, code, false
	}
	return urls, tlsCfg, 0, true
}

// hostPort is a node given as a plain address, host:port: a name, an IPv4
// address or a bracketed IPv6 address, and a port number. No password can
// hide in it.
var hostPort = regexp.MustCompile(`^([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$`)

// urlStart matches an item of a node list that starts a URL: a scheme
// and "://". (A password that holds "://" does not make one.)
var urlStart = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// parseNodes splits a comma-separated list of node URLs (docs/cli.md#nodes)
// and checks each with redlock.ParseNodeURL; a plain host:port is taken
// as redis://host:port, except right after the hosts of a cluster's or a
// Sentinel group's URL, where it is one more of them. Its errors name a
// node by its position and by its URL with credentials removed.
func parseNodes(list string) ([]string, error) {
	items := strings.Split(list, ",")
	var out []string
	open := false // the last URL's host list goes on
	for i, raw := range items {
		switch raw = strings.TrimSpace(raw); {
		case raw == "":
			continue
		case urlStart.MatchString(raw):
			out = append(out, raw)
		case open:
			out[len(out)-1] += "," + raw
		case hostPort.MatchString(raw):
			out = append(out, "redis://"+raw)
		case len(items) > 1:
			// An item that is not a URL is most often the tail of a
			// password with a comma, and the item before it its head:
			// show neither.
			return nil, fmt.Errorf("item %d of the node list is neither a URL nor host:port (the list is not shown: it may hold a password): want %s or host:port; percent-encode a comma in a password as %%2C", i+1, redlock.URLForm)
		default:
			out = append(out, raw)
		}
		open = hostListOpen(out[len(out)-1])
	}
	for i, raw := range out {
		if _, err := redlock.ParseNodeURL(raw); err != nil {
			var ue *redlock.URLError
			if errors.As(err, &ue) {
				return nil, fmt.Errorf("node %d (%s): %w", i+1, ue.URL, ue.Err)
			}
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no nodes: the node list is empty")
	}
	return out, nil
}

// hostListOpen reports whether node is the URL of a cluster or a Sentinel
// group that has no path, query or fragment yet: a host:port after it in
// the list is one more of its hosts.
func hostListOpen(node string) bool {
	scheme, rest, _ := strings.Cut(node, "://")
	return (strings.HasSuffix(scheme, "+cluster") || strings.HasSuffix(scheme, "+sentinel")) && !strings.ContainsAny(rest, "/?#")
}
