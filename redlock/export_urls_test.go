package redlock

import "io"

// OwnedClients returns the clients that NewFromURLs built for l (tests
// only).
func OwnedClients(l *Locker) []io.Closer { return l.owned }

// RedactURL is redactURL (tests only).
var RedactURL = redactURL
