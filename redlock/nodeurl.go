package redlock

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NodeURL is a node URL parsed by ParseNodeURL: the client options of one
// node, of the kind its scheme names. Exactly one field is set. A caller
// may change the options (a TLS configuration, a dialer) before giving it
// to NewFromNodeURLs.
type NodeURL struct {
	Server   *redis.Options         // redis://, rediss://: a standalone master
	Cluster  *redis.ClusterOptions  // redis+cluster://, rediss+cluster://: a Redis Cluster
	Sentinel *redis.FailoverOptions // redis+sentinel://, rediss+sentinel://: a Sentinel group
}

// anyForm names the schemes of every kind of node URL, for messages.
const anyForm = "redis[s]://, redis[s]+cluster:// or redis[s]+sentinel:// (docs/cli.md#nodes)"

// hostListKind is a kind of node whose URL holds a comma-separated list
// of hosts: the cluster's seeds, or the group's sentinels.
type hostListKind struct {
	name        string // for messages
	form        string // the URL's syntax
	defaultPort string
	sentinel    bool
}

// hostListKinds are the kinds of node with a host list, by scheme.
var hostListKinds = map[string]hostListKind{
	"redis+cluster":   {"Redis Cluster", ClusterURLForm, "6379", false},
	"rediss+cluster":  {"Redis Cluster", ClusterURLForm, "6379", false},
	"redis+sentinel":  {"Sentinel group", SentinelURLForm, "26379", true},
	"rediss+sentinel": {"Sentinel group", SentinelURLForm, "26379", true},
}

// ParseNodeURL parses a node URL of any kind (docs/cli.md#nodes): URLForm
// for a standalone master (as ParseURL), ClusterURLForm for a Redis
// Cluster, SentinelURLForm for a Sentinel group. The options it returns
// never retry a command and honour context deadlines. On failure it
// returns a *URLError, matching ErrInvalid and never showing the password.
func ParseNodeURL(raw string) (NodeURL, error) {
	raw = strings.TrimSpace(raw)
	u, err := parseNodeURL(raw)
	if err != nil {
		return NodeURL{}, &URLError{URL: redactURL(raw), Err: err}
	}
	return u, nil
}

// NewFromNodeURLs is NewNodes over one node per parsed URL: a Server or
// a Cluster of a client it builds from the URL's options, which the
// Locker owns (Close closes it), or a Sentinel of the URL's options. On
// failure it leaves no client open and returns an error matching
// ErrInvalid: for a NodeURL with no field or several set, one that names
// it by its index; otherwise NewNodes's.
func NewFromNodeURLs(urls []NodeURL, opts ...Option) (*Locker, error) {
	if len(urls) == 0 {
		return nil, invalid("no URLs")
	}
	nodes := make([]Node, len(urls))
	var owned []io.Closer
	for i, u := range urls {
		n, c, err := u.node(i)
		if err != nil {
			closeClients(owned)
			return nil, err
		}
		nodes[i] = n
		if c != nil {
			owned = append(owned, c)
		}
	}
	l, err := NewNodes(nodes, opts...)
	if err != nil {
		closeClients(owned)
		return nil, err
	}
	l.owned = owned
	return l, nil
}

// node is the node of u, the i-th URL, and the client to close with the
// Locker (nil when it built none).
func (u NodeURL) node(i int) (Node, io.Closer, error) {
	set := 0
	for _, ok := range []bool{u.Server != nil, u.Cluster != nil, u.Sentinel != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return nil, nil, invalid("urls[%d]: a NodeURL has one of Server, Cluster and Sentinel set; this one has %d", i, set)
	}
	switch {
	case u.Server != nil:
		c := redis.NewClient(u.Server)
		return Server(c), c, nil
	case u.Cluster != nil:
		c := redis.NewClusterClient(u.Cluster)
		return Cluster(c), c, nil
	}
	// The Locker opens its own connections from a Sentinel group's
	// options: there is no client to close.
	return Sentinel(u.Sentinel), nil, nil
}

// parseNodeURL is ParseNodeURL without the URL in its errors.
func parseNodeURL(raw string) (NodeURL, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	kind, listed := hostListKinds[scheme]
	switch {
	case raw == "":
		return NodeURL{}, errors.New("empty URL: want " + anyForm)
	case !ok:
		return NodeURL{}, errors.New("not a URL: want " + anyForm)
	case scheme == "redis" || scheme == "rediss":
		o, err := parseServerURL(raw, URLForm)
		return NodeURL{Server: o}, err
	case listed:
		return parseHostListURL(raw, scheme, kind)
	case validScheme(scheme):
		return NodeURL{}, fmt.Errorf("unsupported scheme %q: want %s", scheme, anyForm)
	}
	return NodeURL{}, errors.New("not a node URL: want " + anyForm)
}

// parseHostListURL parses a cluster's or a Sentinel group's URL: its host
// list is checked here, and the rest is parsed as the redis:// or
// rediss:// URL of its first host, with the database of a Sentinel
// group's path and without the query options of its sentinels.
//
// Its errors never quote the URL, nor part of it.
func parseHostListURL(raw, scheme string, kind hostListKind) (NodeURL, error) {
	rest := raw[len(scheme)+len("://"):]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	at := strings.LastIndex(authority, "@")
	if at < 0 && strings.Contains(tail, "@") {
		// The password held a / ? or #, which ended the host list early.
		return NodeURL{}, errors.New("malformed URL: percent-encode / ? # in the user name and password")
	}
	hosts := strings.Split(authority[at+1:], ",")
	addrs, err := hostAddrs(hosts, kind)
	if err != nil {
		return NodeURL{}, err
	}
	pathEnd := strings.IndexAny(tail, "?#")
	if pathEnd < 0 {
		pathEnd = len(tail)
	}
	path, query := tail[:pathEnd], tail[pathEnd:]
	var master, db string
	if kind.sentinel {
		if master, db, err = sentinelPath(path); err != nil {
			return NodeURL{}, err
		}
	} else if path != "" && path != "/" {
		return NodeURL{}, errors.New("unexpected path: a Redis Cluster has no databases to choose: want " + kind.form)
	}
	var sentinelUser, sentinelPass string
	if kind.sentinel {
		if sentinelUser, sentinelPass, query, err = sentinelCredentials(query); err != nil {
			return NodeURL{}, err
		}
	}
	base, _, _ := strings.Cut(scheme, "+")
	o, err := parseServerURL(base+"://"+authority[:at+1]+hosts[0]+db+query, kind.form)
	if errors.As(err, new(queryError)) && sentinelPass != "" {
		return NodeURL{}, hiddenQueryError(kind.form)
	}
	if err != nil {
		return NodeURL{}, err
	}
	if !kind.sentinel {
		if o.DB != 0 {
			return NodeURL{}, errors.New("unexpected db option: a Redis Cluster has no databases to choose")
		}
		return NodeURL{Cluster: clusterOptions(o, addrs)}, nil
	}
	f := failoverOptions(o, addrs, master)
	f.SentinelUsername, f.SentinelPassword = sentinelUser, sentinelPass
	return NodeURL{Sentinel: f}, nil
}

// hostName is a host of a host list: a name, an IPv4 address, or an IPv6
// address in brackets.
var hostName = regexp.MustCompile(`^([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])$`)

// hostAddrs returns the host:port of each host of a host list, with the
// kind's default port where none is given. Its errors name a host by its
// position, never by its text: a password that lost its "@" can be one.
func hostAddrs(hosts []string, kind hostListKind) ([]string, error) {
	addrs := make([]string, len(hosts))
	for i, h := range hosts {
		where := ""
		if len(hosts) > 1 {
			where = fmt.Sprintf("host %d of %d: ", i+1, len(hosts))
		}
		host, port, colon := splitHostPort(h)
		switch {
		case h == "":
			return nil, errors.New(where + "missing host: want " + kind.form)
		case colon && !validPort(port):
			return nil, errors.New(where + "the port is not a number from 1 to 65535: want " + kind.form)
		case !hostName.MatchString(host):
			return nil, errors.New(where + "invalid host: a name or an IP address, an IPv6 one in brackets: want " + kind.form)
		}
		if !colon {
			port = kind.defaultPort
		}
		addrs[i] = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	return addrs, nil
}

// validPort reports whether port is a TCP port number.
func validPort(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535 && strings.Trim(port, "0123456789") == ""
}

// sentinelPath splits a Sentinel group URL's path, /master[/db], into the
// master's name and the database's path ("" or "/db").
func sentinelPath(path string) (master, db string, err error) {
	name, number, hasDB := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if master, err = url.PathUnescape(name); err != nil || master == "" {
		return "", "", errors.New("missing master name: the path must be /<master>[/<db>]: want " + SentinelURLForm)
	}
	if hasDB && (number == "" || strings.Trim(number, "0123456789") != "") {
		return "", "", errors.New("invalid database number: the path must be /<master>[/<number>]: want " + SentinelURLForm)
	}
	if hasDB {
		db = "/" + number
	}
	return master, db, nil
}

// sentinelCredentials takes the sentinels' own credentials
// (sentinel_username, sentinel_password) out of a URL's "?query#fragment",
// and returns what is left of it.
func sentinelCredentials(query string) (user, password, rest string, err error) {
	q, ok := strings.CutPrefix(query, "?")
	if !ok {
		return "", "", query, nil
	}
	q, fragment, hasFragment := strings.Cut(q, "#")
	values, err := url.ParseQuery(q)
	if err != nil {
		// Not quoted: the query may hold a password.
		return "", "", "", errors.New("malformed query: percent-encode % & = + ; in option values: want " + SentinelURLForm)
	}
	user, password = values.Get("sentinel_username"), values.Get("sentinel_password")
	values.Del("sentinel_username")
	values.Del("sentinel_password")
	if len(values) > 0 {
		rest = "?" + values.Encode()
	}
	if hasFragment {
		rest += "#" + fragment
	}
	return user, password, rest, nil
}

// clusterOptions are the options of a cluster whose seeds are addrs,
// with every setting o has.
func clusterOptions(o *redis.Options, addrs []string) *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs: addrs, ClientName: o.ClientName, Protocol: o.Protocol,
		Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		PoolFIFO:              o.PoolFIFO, PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout,
		MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns, MaxActiveConns: o.MaxActiveConns,
		MaxConcurrentDials: o.MaxConcurrentDials, PipelinePoolSize: o.PipelinePoolSize,
		PipelineReadBufferSize: o.PipelineReadBufferSize, PipelineWriteBufferSize: o.PipelineWriteBufferSize,
		ConnMaxIdleTime: o.ConnMaxIdleTime, ConnMaxLifetime: o.ConnMaxLifetime,
		ConnMaxLifetimeJitter: o.ConnMaxLifetimeJitter,
	}
}

// failoverOptions are the options of the Sentinel group whose sentinels
// are addrs and whose master is named master, with every setting o has.
func failoverOptions(o *redis.Options, addrs []string, master string) *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName: master, SentinelAddrs: addrs, DB: o.DB, ClientName: o.ClientName, Protocol: o.Protocol,
		Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		MaxRetries: o.MaxRetries, MinRetryBackoff: o.MinRetryBackoff, MaxRetryBackoff: o.MaxRetryBackoff,
		DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		PoolFIFO:              o.PoolFIFO, PoolSize: o.PoolSize, PoolTimeout: o.PoolTimeout,
		MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns, MaxActiveConns: o.MaxActiveConns,
		MaxConcurrentDials: o.MaxConcurrentDials, PipelinePoolSize: o.PipelinePoolSize,
		PipelineReadBufferSize: o.PipelineReadBufferSize, PipelineWriteBufferSize: o.PipelineWriteBufferSize,
		ConnMaxIdleTime: o.ConnMaxIdleTime, ConnMaxLifetime: o.ConnMaxLifetime,
		ConnMaxLifetimeJitter: o.ConnMaxLifetimeJitter,
	}
}
