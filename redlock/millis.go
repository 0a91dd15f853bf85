package redlock

import "time"

// serverMillis converts a duration to the whole milliseconds Redis counts
// TTLs in, rounded up: a key then lives at least as long as the duration the
// validity arithmetic uses, so truncation never eats into the drift margin.
// A lock's local validity stays computed from the unrounded duration, never
// longer than what the servers hold.
func serverMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond) // truncated toward zero
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}
