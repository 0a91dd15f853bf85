package redlock

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The node URL forms (docs/cli.md#nodes), for messages and usage texts:
// URLForm names a standalone master (ParseURL), ClusterURLForm a Redis
// Cluster and SentinelURLForm a Sentinel group (ParseNodeURL takes all).
const (
	URLForm         = "redis://[[user]:password@]host[:port][/db][?option=value...], or rediss:// for TLS"
	ClusterURLForm  = "redis+cluster://[[user]:password@]host[:port][,host[:port]...][?option=value...], or rediss+cluster:// for TLS"
	SentinelURLForm = "redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db][?option=value...], or rediss+sentinel:// for TLS"
)

// URLError is the error of ParseURL and ParseNodeURL about one node URL.
// Neither field ever holds the URL's password.
type URLError struct {
	URL string // the URL, its user info (up to the last "@"), query and fragment masked
	Err error  // what is wrong with it
}

// Error returns "node URL <URL>: <Err>".
func (e *URLError) Error() string { return "node URL " + e.URL + ": " + e.Err.Error() }

// Unwrap returns ErrInvalid and Err.
func (e *URLError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// ParseURL parses a standalone master's node URL (URLForm;
// docs/cli.md#nodes) into client options for lock use; ParseNodeURL
// takes every kind of node. On failure it returns a *URLError, matching
// ErrInvalid and never showing the password.
func ParseURL(raw string) (*redis.Options, error) {
	raw = strings.TrimSpace(raw)
	o, err := parseURL(raw)
	if err != nil {
		return nil, &URLError{URL: redactURL(raw), Err: err}
	}
	return o, nil
}

// parseURL is ParseURL without the URL in its errors.
func parseURL(raw string) (*redis.Options, error) {
	if raw == "" {
		return nil, errors.New("empty URL: want " + URLForm)
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("not a URL: want " + URLForm)
	}
	if scheme != "redis" && scheme != "rediss" {
		if _, multi := hostListKinds[scheme]; multi {
			return nil, fmt.Errorf("%s:// is the scheme of a %s: this parser takes a standalone master's URL (ParseNodeURL takes every kind)", scheme, hostListKinds[scheme].name)
		}
		if validScheme(scheme) {
			return nil, fmt.Errorf("unsupported scheme %q: want %s", scheme, URLForm)
		}
		return nil, errors.New("not a redis:// or rediss:// URL: want " + URLForm)
	}
	return parseServerURL(raw, URLForm)
}

// parseServerURL parses a redis:// or rediss:// URL into options for lock
// use; form is the syntax its errors ask for.
//
// Its errors never quote the URL: url.Parse's do, with the password. When
// the URL has credentials, the errors of url.Parse are not passed on at all,
// since a misplaced password can end up in the part they quote.
func parseServerURL(raw, form string) (*redis.Options, error) {
	hasCreds := strings.Contains(raw, "@")
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if hasCreds || !errors.As(err, &ue) {
			return nil, errors.New("malformed URL (percent-encode special characters in the user name and password): want " + form)
		}
		if strings.Contains(ue.Err.Error(), "port") {
			// A port that is not a number may be a password that lost its
			// "@host" (redis://:secret): the error would quote it.
			return nil, errors.New("malformed URL: the port is not a number: want " + form)
		}
		return nil, fmt.Errorf("malformed URL: %v", ue.Err)
	}
	switch {
	case u.User == nil && strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment, "@"):
		// The password held a / ? or #, which ended the host early.
		return nil, errors.New("malformed URL: percent-encode / ? # in the user name and password")
	case u.Host == "":
		// go-redis would take localhost: a lock should name its servers.
		return nil, errors.New("missing host: want " + form)
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		return nil, errors.New("unexpected #fragment: want " + form)
	case !isDBPath(u.Path):
		// Not quoted: a password that lost its "@host" can end up here
		// (redis://user:/secret).
		return nil, errors.New("invalid database number: the path must be /<number>: want " + form)
	}
	// go-redis's parser knows the query options; what it can quote in an
	// error (the database path, option names and values) holds no password
	// once the checks above have passed.
	o, err := redis.ParseURL(raw)
	if err != nil && strings.Contains(strings.ToLower(u.RawQuery), "password") {
		// An unencoded & in a password given as an option makes its tail
		// an option name, which the error would quote.
		return nil, hiddenQueryError(form)
	}
	if err != nil {
		return nil, queryError{errors.New(strings.TrimPrefix(err.Error(), "redis: "))}
	}
	// The lock bounds every node call itself, and a retried script would be
	// a second vote from the same node in a later round. (New applies the
	// same rules to its own connections; these are for any other use of
	// the options.)
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	return o, nil
}

// queryError is go-redis's error about a URL's query options, which can
// quote any of them.
type queryError struct{ error }

func (e queryError) Unwrap() error { return e.error }

// hiddenQueryError is the error about the query options of a URL whose
// query holds a password: it names none of them.
func hiddenQueryError(form string) error {
	return errors.New("invalid query option (not shown: the query holds a password; percent-encode & # + % in it): want " + form)
}

// NewFromURLs is NewFromNodeURLs over urls parsed by ParseNodeURL: one
// node per URL, of any kind (docs/cli.md#nodes), whose clients the Locker
// owns. On failure it leaves no client open and returns an error matching
// ErrInvalid: for a bad URL, one that wraps a *URLError and names the URL
// by its index; otherwise NewFromNodeURLs's.
func NewFromURLs(urls []string, opts ...Option) (*Locker, error) {
	if len(urls) == 0 {
		return nil, invalid("no URLs")
	}
	parsed := make([]NodeURL, len(urls))
	for i, raw := range urls {
		u, err := ParseNodeURL(raw)
		if err != nil {
			return nil, fmt.Errorf("redlock: urls[%d]: %w", i, err)
		}
		parsed[i] = u
	}
	return NewFromNodeURLs(parsed, opts...)
}

// closeClients closes clients the Locker built. They never sent a command
// (the Locker takes only their options), so closing them cannot fail in a
// way worth reporting.
func closeClients(clients []io.Closer) {
	for _, c := range clients {
		_ = c.Close()
	}
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

// redactURL returns raw, which need not be a valid URL, for messages. A
// malformed URL can put a password anywhere, so only what cannot be part of
// one is shown: everything between the scheme and the last "@" is replaced
// (the user name too: in a malformed URL it may hold part of the password),
// and so is everything after the scheme when an "@" follows a ? or # (a
// password holds them, or was put in the query). Without an "@", a port
// that is not a number, or after no host, is replaced, with all that
// follows it (a password that lost its "@host" reads as one:
// redis://:secret); in a host list (redis+cluster://h1,h2), with or
// without an "@", such a port hides the whole list and all that follows.
// A path is shown only when it is a database number (redis://u:p@ss/word
// has no host: its "path" is part of the password); a query or fragment
// only as "?...".
func redactURL(raw string) string {
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	head, rest := raw[:start], raw[start:]
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if q := strings.IndexAny(rest, "?#"); q >= 0 && q < at {
			return head + "xxxxx"
		}
		head += "xxxxx@"
		rest = rest[at+1:]
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	hosts, tail, query := rest[:end], rest[end:], ""
	if i := strings.IndexAny(tail, "?#"); i >= 0 {
		tail, query = tail[:i], "?..."
	}
	// A port after the "@" is no password, unless a list follows, where
	// one can be an item.
	if !strings.HasSuffix(head, "@") || strings.Contains(hosts, ",") {
		var hid bool
		if hosts, hid = redactHosts(hosts); hid {
			// What follows may be the rest of the password
			// (redis://:pass/0000).
			tail, query = "", ""
		}
	}
	if !isDBPath(tail) {
		tail = "/..."
	}
	return head + hosts + tail + query
}

// redactHosts returns a URL's host or comma-separated host list for
// messages, and whether it hid part of it: a port that is not a number,
// or any port after no host, may be (part of) a password that lost its
// "@host" (redis://:secret, redis://:1234, redis+cluster://h,:,123). In a list, such a port hides the
// whole list, whose other items may hold the rest of the password
// (redis+cluster://:pass,word).
func redactHosts(hosts string) (string, bool) {
	items := strings.Split(hosts, ",")
	for _, item := range items {
		host, port, colon := splitHostPort(item)
		if !(colon && host == "") && strings.Trim(port, "0123456789") == "" {
			continue
		}
		if len(items) > 1 {
			return "xxxxx", true
		}
		return host + ":xxxxx", true
	}
	return hosts, false
}

// splitHostPort splits "host:port" at the colon that ends the host (the
// first one, or the one after "]"), unlike net.SplitHostPort, which
// splits at the last: a colon after the first belongs to what is not a
// port. colon reports whether there was one.
func splitHostPort(s string) (host, port string, colon bool) {
	from := 0
	if strings.HasPrefix(s, "[") {
		if i := strings.Index(s, "]"); i >= 0 {
			from = i + 1
		}
	}
	if i := strings.Index(s[from:], ":"); i >= 0 {
		return s[:from+i], s[from+i+1:], true
	}
	return s, "", false
}

// isDBPath reports whether path is empty, "/" or a database number.
func isDBPath(path string) bool {
	return path == "" || path == "/" || path[0] == '/' && strings.Trim(path[1:], "0123456789") == ""
}
