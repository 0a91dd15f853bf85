//go:build !linux

package main

import "time"

// sharedNow reads a clock that redlock and its watchdog, two processes,
// both read. Here it is the wall clock: a step back of the clock delays
// the watchdog by as much (see docs/cli.md).
func sharedNow() (int64, error) { return time.Now().UnixNano(), nil }
