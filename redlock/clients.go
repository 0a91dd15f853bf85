package redlock

import (
	"github.com/redis/go-redis/v9"
)

// nodeClient returns client i as the plain *redis.Client the Locker takes
// its connection settings from, or an error matching ErrInvalid.
//
// Only a plain client is taken, because the lock never sends a script
// through the caller's client: it opens connections of its own from the
// client's options (see privateOptions), so that whatever the caller's
// client does (retry a command after a broken connection, ignore context
// deadlines, follow a MOVED reply to another node), no script reaches a node
// twice and no wait on a node outlasts the node timeout. A client of another
// type could not be made safe that way: a cluster or ring client spreads the
// keys of one script over several servers, and a wrapper's own methods would
// never be called.
func nodeClient(i int, c redis.UniversalClient) (*redis.Client, error) {
	switch c := c.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return nil, invalid("client %d is a *redis.ClusterClient: a lock's keys fall in several hash slots, and a cluster is one node to Redlock; "+
			"give one plain *redis.Client per master (redis.NewClient with the master's address), and at least three independent masters", i)
	case *redis.Ring:
		return nil, invalid("client %d is a *redis.Ring: a ring spreads a lock's keys over several servers; give one plain *redis.Client per server", i)
	}
	return nil, invalid("client %d is a %T, not a *redis.Client: the lock opens its own connections from a plain client's options, "+
		"so that no script is sent twice and no wait outlasts the node timeout (inject faults with the client's Dialer instead)", i, c)
}
