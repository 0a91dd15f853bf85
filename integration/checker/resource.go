package checker

import (
	"sync"
	"time"
)

// Write is one write to a fenced resource.
type Write struct {
	Client   int
	Key      string
	Token    string
	Fence    uint64
	At       time.Time
	Accepted bool
}

// Resource is a storage service protected by fencing tokens, the way the
// fencing design asks a protected resource to behave: per key it keeps the
// highest token it has accepted and rejects writes that carry a lower one.
// An equal token is accepted, so a holder can write more than once. Every
// write, accepted or not, goes into the History for the checker.
type Resource struct {
	h       *History
	mu      sync.Mutex
	highest map[string]uint64
}

// NewResource returns a resource that records its writes in h.
func NewResource(h *History) *Resource {
	return &Resource{h: h, highest: make(map[string]uint64)}
}

// Write tries a write to key by the holder of the lock with the given token
// and fence, and reports whether the resource accepted it.
func (r *Resource) Write(client int, key, token string, fence uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := fence >= r.highest[key]
	if ok {
		r.highest[key] = fence
	}
	// The time is taken under r.mu, so the writes of a key are recorded in
	// the order the resource decided them.
	w := Write{Client: client, Key: key, Token: token, Fence: fence, At: time.Now(), Accepted: ok}
	r.h.AddWrite(w)
	return ok
}
