//go:build !unix

package main

import (
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
