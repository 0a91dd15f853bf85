package redlock

import "github.com/redis/go-redis/v9"

// OwnedClients returns the clients that NewFromURLs built for l (tests
// only).
func OwnedClients(l *Locker) []*redis.Client { return l.owned }

// RedactURL is redactURL (tests only).
var RedactURL = redactURL
