package conn

import (
	"net"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NodeAddr returns the address of the node that o names, credentials
// removed, and a key equal for two options of the same address (the usual
// spellings of the loopback host count as one). ok is false when the
// address says nothing: a Sentinel-backed client reports the placeholder
// "FailoverClient".
func NodeAddr(o *redis.Options) (addr, key string, ok bool) {
	if o.Addr == "" || IsFailoverClient(o) {
		return "", "", false
	}
	addr = redactAddr(o.Addr)
	return addr, o.Network + " " + normalizeAddr(addr), true
}

// normalizeAddr makes the usual spellings of the loopback host equal, so
// "localhost:6379" and "127.0.0.1:6379" count as one node.
func normalizeAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	switch host = strings.ToLower(host); host {
	case "", "localhost", "127.0.0.1", "::1":
		host = "loopback"
	}
	return net.JoinHostPort(host, port)
}

// redactAddr removes credentials from an address or URL.
func redactAddr(addr string) string {
	if strings.Contains(addr, "://") {
		if u, err := url.Parse(addr); err == nil {
			u.User = nil
			return u.String()
		}
	}
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// failoverAddr is the address go-redis gives the options of a client made
// by redis.NewFailoverClient, whose dialer asks Sentinel for the master.
const failoverAddr = "FailoverClient"

// IsFailoverClient reports whether o are the options of a Sentinel
// failover client (redis.NewFailoverClient).
func IsFailoverClient(o *redis.Options) bool { return o.Addr == failoverAddr }
