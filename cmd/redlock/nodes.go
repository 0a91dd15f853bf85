package main

import (
	"errors"
	"fmt"
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
	nodes       string
	nodeTimeout time.Duration
}

func (n *nodeFlags) register(fs *flagSet) {
	// The default is read from the environment after parsing, never shown
	// as the flag's default: it may hold passwords.
	fs.StringVar(&n.nodes, "nodes", "", "comma-separated redis:// or rediss:// `URLs` of the Redis masters,\n"+
		"redis[s]://[[user]:password@]host[:port][/db][?option=value...];\n"+
		"percent-encode , / ? # @ in a password (default $"+envNodes+")")
	fs.durationVar(&n.nodeTimeout, "node-timeout", defaultNodeTimeout, "bound on each call to one node; a slower node counts\nas failed")
}

// locker connects to the nodes and returns a Locker over them with opts as
// its defaults, and a function that closes the Locker (and with it the
// clients it built). ok is false when redlock should exit with code; the
// error is reported then.
func (a *app) locker(fs *flagSet, n *nodeFlags, opts ...redlock.Option) (l *redlock.Locker, closeAll func(), code int, ok bool) {
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
	l, err = redlock.NewFromURLs(urls, append([]redlock.Option{redlock.WithNodeTimeout(n.nodeTimeout)}, opts...)...)
	if err != nil {
		return nil, nil, a.fail(fs.cmd, "nodes", err), false
	}
	return l, func() {
		// Close waits for background clean-up and cannot fail.
		_ = l.Close()
	}, 0, true
}

// parseNodes splits a comma-separated list of node URLs and checks each
// with redlock.ParseURL. Its errors name a node by its position and by its
// URL with credentials removed.
func parseNodes(list string) ([]string, error) {
	items := strings.Split(list, ",")
	if len(items) > 1 {
		// An item that is not a URL is most often the tail of a password
		// with a comma, and the item before it its head: show neither.
		for i, raw := range items {
			if raw = strings.TrimSpace(raw); raw != "" && !strings.Contains(raw, "://") {
				return nil, fmt.Errorf("item %d of the node list is not a URL (the list is not shown: it may hold a password): want %s; percent-encode a comma in a password as %%2C", i+1, redlock.URLForm)
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
