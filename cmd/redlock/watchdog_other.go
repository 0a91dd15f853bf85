//go:build !unix

package main

import (
	"io"
	"os/exec"
	"time"
)

// watchdog is not available here: the command is stopped by redlock alone
// (see docs/cli.md).
type watchdog struct {
	exited chan struct{}
	err    error
}

const (
	watchdogCommand = "__watchdog"
	execCommand     = "__exec"
)

// gate does nothing here: the command starts at once.
func gate(*exec.Cmd) (func(bool) error, error) { return func(bool) error { return nil }, nil }

func (a *app) execMain([]string) int { return exitUsage }

func startWatchdog(io.Writer, []string) (*watchdog, error) {
	return &watchdog{exited: make(chan struct{})}, nil
}

func (*watchdog) watch(procGroup) error  { return nil }
func (*watchdog) killAt(time.Time) error { return nil }
func (*watchdog) stop()                  {}
func (a *app) watchdogMain() int         { return exitUsage }
