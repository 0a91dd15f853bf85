//go:build !unix

package main

import (
	"errors"
	"os"
	"os/exec"
)

// forwardedSignals are the signals redlock passes on to the command.
var forwardedSignals = []os.Signal{os.Interrupt}

var (
	sigTerm = os.Kill // no SIGTERM here: the command is stopped at once
	sigKill = os.Kill
)

// setProcessGroup does nothing here: there are no process groups.
func setProcessGroup(*exec.Cmd, *terminal) {}

func signalGroup(p *os.Process, sig os.Signal) error { return p.Signal(sig) }

func signalExitCode(os.Signal) int { return exitFailure }

func commandExitCode(ps *os.ProcessState) int { return ps.ExitCode() }

// procGroup is the command alone here: there are no process groups.
type procGroup struct{ p *os.Process }

func groupOf(p *os.Process) procGroup { return procGroup{p: p} }

// id is the command's process id, for messages.
func (g procGroup) id() int { return g.p.Pid }

func (g procGroup) signal(sig os.Signal) error { return g.p.Signal(sig) }

// alive is false: once the command has exited, nothing of it is left that
// redlock could find.
func (procGroup) alive() bool { return false }

func ownGroup() (procGroup, string) { return procGroup{}, "there are no process groups here" }

func leaveGroup() error { return errors.ErrUnsupported }
