// Package clock provides the time source and the validity arithmetic of a
// Redlock lock.
//
// A lock obtained at start with time-to-live ttl is safe to use only until
//
//	start + ttl − elapsed − drift
//
// where elapsed is the time the quorum round took and drift bounds how much
// faster a server's clock may run than ours (Redis expires keys by its own
// clock, with millisecond precision). Elapsed time is measured with Go's
// monotonic clock, so a wall-clock jump cannot stretch a lock.
package clock

import (
	"sync"
	"time"
)

// Clock is a source of time. Since must be consistent with Now: Since(t) is
// Now() minus t.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
}

// Real is the system clock. Its readings carry Go's monotonic clock reading,
// so elapsed times are immune to wall-clock changes.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }

// DefaultDriftFactor is the share of the TTL reserved for clock drift between
// this process and the Redis servers.
const DefaultDriftFactor = 0.01

// ExpiryPrecision is the fixed part of the drift: Redis expires keys with
// one millisecond precision, plus one millisecond of margin.
const ExpiryPrecision = 2 * time.Millisecond

// Drift returns the time subtracted from a lock's TTL to cover clock drift:
// ttl × factor + ExpiryPrecision.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + ExpiryPrecision
}

// Validity returns how long a lock with the given TTL stays safe to use after
// an acquisition that took elapsed: ttl − elapsed − Drift(ttl, factor).
// A result ≤ 0 means the lock must not be used at all.
//
// Drift is subtracted because each server expires the key by its own clock:
// if a server's clock runs fast, its key disappears before our TTL says so, and
// another client may take it there. Elapsed is subtracted because the TTL
// started running on the first server when the request reached it, not when
// the last reply came back.
func Validity(ttl, elapsed time.Duration, factor float64) time.Duration {
	return ttl - elapsed - Drift(ttl, factor)
}

// Fake is a Clock for tests that moves only when told to. The zero value
// starts at the zero time; it is safe for concurrent use.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake returns a Fake clock that reads t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns the fake time minus t.
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// Advance moves the fake time forward by d (backward if d is negative).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}
