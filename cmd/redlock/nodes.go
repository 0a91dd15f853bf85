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

	"github.com/redis/go-redis/v9"

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
	fs.StringVar(&n.nodes, "nodes", "", "comma-separated redis:// or rediss:// `URLs` of the Redis masters,\n"+
		"redis[s]://[[user]:password@]host[:port][/db][?option=value...],\n"+
		"or host:port for redis://host:port;\n"+
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
	urls, tlsCfg, code, ok := a.nodeURLs(fs, n)
	if !ok {
		return nil, nil, code, false
	}
	// The library's warnings are for the commands that take a lock, which
	// give their logger in opts; the others show the nodes' state anyway.
	opts = append([]redlock.Option{redlock.WithNodeTimeout(n.nodeTimeout), redlock.WithLogger(quietLogger())}, opts...)
	if tlsCfg == nil {
		l, err := redlock.NewFromURLs(urls, opts...)
		if err != nil {
			return nil, nil, a.fail(fs.cmd, "nodes", err), false
		}
		return l, func() {
			// Close waits for background clean-up and cannot fail.
			_ = l.Close()
		}, 0, true
	}
	clients, closeClients, code, ok := a.buildClients(fs, urls, tlsCfg)
	if !ok {
		return nil, nil, code, false
	}
	l, err := redlock.New(clients, opts...)
	if err != nil {
		closeClients()
		return nil, nil, a.fail(fs.cmd, "nodes", err), false
	}
	return l, func() {
		_ = l.Close()
		closeClients()
	}, 0, true
}

// clients returns one client per node, and a function that closes them.
// ok is false when redlock should exit with code; the error is reported
// then.
func (a *app) clients(fs *flagSet, n *nodeFlags) (clients []*redis.Client, closeAll func(), code int, ok bool) {
	urls, tlsCfg, code, ok := a.nodeURLs(fs, n)
	if !ok {
		return nil, nil, code, false
	}
	return a.buildClients(fs, urls, tlsCfg)
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

// buildClients builds one client per URL, with the TLS settings on every
// rediss:// node when tlsCfg is set (each keeps the URL's server name to
// verify), and returns a function that closes them. ok is false when
// redlock should exit with code; the error is reported then.
func (a *app) buildClients(fs *flagSet, urls []string, tlsCfg *tls.Config) (clients []*redis.Client, closeAll func(), code int, ok bool) {
	clients = make([]*redis.Client, len(urls))
	closeAll = func() {
		for _, c := range clients {
			if c != nil {
				_ = c.Close()
			}
		}
	}
	tlsNodes := 0
	for i, u := range urls {
		o, err := redlock.ParseURL(u) // checked by parseNodes
		if err != nil {
			closeAll()
			return nil, nil, a.usageError(fs.cmd, err.Error()), false
		}
		if tlsCfg != nil && o.TLSConfig != nil {
			c := tlsCfg.Clone()
			c.ServerName = o.TLSConfig.ServerName
			c.InsecureSkipVerify = o.TLSConfig.InsecureSkipVerify
			o.TLSConfig = c
			tlsNodes++
		}
		clients[i] = redis.NewClient(o)
	}
	if tlsCfg != nil && tlsNodes == 0 {
		closeAll()
		return nil, nil, a.usageError(fs.cmd, "--tls-ca, --tls-cert and --tls-key are for rediss:// nodes, and none is given"), false
	}
	return clients, closeAll, 0, true
}

// hostPort is a node given as a plain address, host:port: a name, an IPv4
// address or a bracketed IPv6 address, and a port number. No password can
// hide in it.
var hostPort = regexp.MustCompile(`^([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$`)

// parseNodes splits a comma-separated list of node URLs and checks each
// with redlock.ParseURL; a plain host:port is taken as redis://host:port.
// Its errors name a node by its position and by its URL with credentials
// removed.
func parseNodes(list string) ([]string, error) {
	items := strings.Split(list, ",")
	for i, raw := range items {
		if raw = strings.TrimSpace(raw); hostPort.MatchString(raw) {
			items[i] = "redis://" + raw
		}
	}
	if len(items) > 1 {
		// An item that is not a URL is most often the tail of a password
		// with a comma, and the item before it its head: show neither.
		for i, raw := range items {
			if raw = strings.TrimSpace(raw); raw != "" && !strings.Contains(raw, "://") {
				return nil, fmt.Errorf("item %d of the node list is neither a URL nor host:port (the list is not shown: it may hold a password): want %s or host:port; percent-encode a comma in a password as %%2C", i+1, redlock.URLForm)
			}
		}
	}
	var out []string
	for i, raw := range items {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		if _, err := redlock.ParseURL(raw); err != nil {
			var ue *redlock.URLError
			if errors.As(err, &ue) {
				return nil, fmt.Errorf("node %d (%s): %w", i+1, ue.URL, ue.Err)
			}
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
		out = append(out, raw)
	}
	if len(out) == 0 {
		return nil, errors.New("no nodes: the node list is empty")
	}
	return out, nil
}
