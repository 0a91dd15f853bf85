//go:build !unix

package main

import (
	"io"
	"time"
)

// watchdog is not available here: the command is stopped by redlock alone
// (see docs/cli.md).
type watchdog struct{ exited chan struct{} }

const watchdogCommand = "__watchdog"

func startWatchdog(io.Writer, []string) (*watchdog, error) {
	return &watchdog{exited: make(chan struct{})}, nil
}

func (*watchdog) watch(procGroup) error  { return nil }
func (*watchdog) killAt(time.Time) error { return nil }
func (*watchdog) stop()                  {}
func (a *app) watchdogMain() int         { return exitUsage }
