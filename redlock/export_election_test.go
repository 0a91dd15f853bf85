package redlock

import "time"

// SetObservePoll sets how often Observe asks the nodes without a
// notification, and returns what restores it (tests only).
func SetObservePoll(d time.Duration) (restore func()) {
	old := observePoll
	observePoll = d
	return func() { observePoll = old }
}
