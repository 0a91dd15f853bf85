package main

import (
	"errors"
	"fmt"
	"net/url"
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
// its defaults, and a function that closes the Locker and the clients. ok is
// false when redlock should exit with code; the error is reported then.
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
	options, err := parseNodes(list)
	if err != nil {
		return nil, nil, a.usageError(fs.cmd, err.Error()), false
	}
	clients := make([]redis.UniversalClient, len(options))
	for i, o := range options {
		clients[i] = redis.NewClient(o)
	}
	closeClients := func() {
		for _, c := range clients {
			// Closing a client only fails when it was closed already.
			_ = c.Close()
		}
	}
	l, err = redlock.New(clients, append([]redlock.Option{redlock.WithNodeTimeout(n.nodeTimeout)}, opts...)...)
	if err != nil {
		closeClients()
		return nil, nil, a.fail(fs.cmd, "nodes", err), false
	}
	return l, func() {
		// Close waits for background clean-up and cannot fail.
		_ = l.Close()
		closeClients()
	}, 0, true
}

// parseNodes parses a comma-separated list of node URLs. Its errors name a
// node by its position and by its URL with credentials removed.
func parseNodes(list string) ([]*redis.Options, error) {
	items := strings.Split(list, ",")
	if len(items) > 1 {
		// An item that is not a URL is most often the tail of a password
		// with a comma, and the item before it its head: show neither.
		for i, raw := range items {
			if raw = strings.TrimSpace(raw); raw != "" && !strings.Contains(raw, "://") {
				return nil, fmt.Errorf("item %d of the node list is not a URL (the list is not shown: it may hold a password): %s; percent-encode a comma in a password as %%2C", i+1, urlForm)
			}
		}
	}
	var out []*redis.Options
	for i, raw := range items {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		o, err := parseNode(raw)
		if err != nil {
			return nil, fmt.Errorf("node %d (%s): %w", i+1, redactURL(raw), err)
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		return nil, errors.New("no nodes: the node list is empty")
	}
	return out, nil
}

const urlForm = "want redis://[[user]:password@]host[:port][/db], or rediss:// for TLS"

// parseNode parses one node URL into client options set up for lock use:
// context deadlines honoured, no command retries.
//
// Its errors never quote the URL: url.Parse's do, with the password. When
// the URL has credentials, the errors of url.Parse are not passed on at all,
// since a misplaced password can end up in the part they quote.
func parseNode(raw string) (*redis.Options, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("not a URL: " + urlForm)
	}
	if scheme != "redis" && scheme != "rediss" {
		if validScheme(scheme) {
			return nil, fmt.Errorf("unsupported scheme %q: %s", scheme, urlForm)
		}
		return nil, errors.New("not a redis:// or rediss:// URL: " + urlForm)
	}
	hasCreds := strings.Contains(raw, "@")
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if hasCreds || !errors.As(err, &ue) {
			return nil, errors.New("malformed URL (percent-encode special characters in the user name and password): " + urlForm)
		}
		if strings.Contains(ue.Err.Error(), "port") {
			// A port that is not a number may be a password that lost its
			// "@host" (redis://:secret): the error would quote it.
			return nil, errors.New("malformed URL: the port is not a number: " + urlForm)
		}
		return nil, fmt.Errorf("malformed URL: %v", ue.Err)
	}
	switch {
	case u.User == nil && strings.Contains(u.Host+u.Path+u.Fragment, "@"):
		// The password held a / ? or #, which ended the host early.
		return nil, errors.New("malformed URL: percent-encode / ? # in the user name and password")
	case u.Host == "":
		return nil, errors.New("missing host: " + urlForm)
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		return nil, errors.New("unexpected #fragment: " + urlForm)
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "redis: "))
	}
	// The lock bounds every node call itself, and a retried script would be
	// a second vote from the same node in a later round.
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	return o, nil
}

func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return true
}

// redactURL returns raw, which need not be a valid URL, for messages: with
// everything between the scheme and the last "@" replaced (the user name and
// password, and whatever a malformed URL put there), and without its query
// and fragment. The user name goes too: in a malformed URL it may be part of
// the password. Without an "@", a port that is not a number is replaced:
// it may be a password that lost its "@host" (redis://:secret).
func redactURL(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	head, rest := raw[:start], raw[start:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		head += "xxxxx@"
		rest = rest[at+1:]
	} else {
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		hostPort := rest[:end]
		if i := strings.LastIndex(hostPort, ":"); i >= 0 && !strings.HasSuffix(hostPort, "]") &&
			strings.Trim(hostPort[i+1:], "0123456789") != "" {
			rest = hostPort[:i+1] + "xxxxx" + rest[end:]
		}
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i] + "?..."
	}
	return head + rest
}
