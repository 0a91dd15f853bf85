//go:build unix

package main

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// forwardedSignals are the signals redlock passes on to the command.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

var (
	sigTerm os.Signal = syscall.SIGTERM
	sigKill os.Signal = syscall.SIGKILL
)

// setProcessGroup makes the command the leader of a new process group, so
// that a lost lock stops everything it started (a shell's children too).
// With a terminal (tty not nil) that group gets the terminal's foreground:
// the command can read from it, and the keys that send signals (Ctrl-C)
// reach the command alone. Without one, a Ctrl-C on the terminal reaches
// redlock alone, which forwards it once.
func setProcessGroup(cmd *exec.Cmd, tty *terminal) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	tty.handOver(cmd.SysProcAttr)
	setParentDeathSignal(cmd.SysProcAttr)
}

// signalGroup sends sig to the process group that p leads.
//
// Callers only signal before p has been waited for, so its group id cannot
// have been reused; the window between Wait reaping p and the caller
// learning of it is a few instructions long.
func signalGroup(p *os.Process, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return p.Signal(sig)
	}
	err := syscall.Kill(-p.Pid, s)
	if err == syscall.ESRCH {
		return os.ErrProcessDone
	}
	return err
}

// signalExitCode is the shell's exit code for death by sig: 128+N.
func signalExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFailure
}

// commandExitCode is the command's exit code, 128+N when signal N ended it.
func commandExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// ownGroup is redlock's own process group, when it can be stopped with
// redlock: the group of the script that started it, which no interactive
// shell leads. Otherwise why says why not.
func ownGroup() (g procGroup, why string) {
	pgid := syscall.Getpgrp()
	switch {
	case pgid == os.Getpid():
		return procGroup{}, "redlock leads its own process group (a shell with job control started it, or setsid): no script shares it"
	case interactiveGroup(pgid):
		return procGroup{}, "its process group is an interactive shell's (the terminal's foreground, led by the session's leader)"
	}
	return procGroup{pgid: pgid}, ""
}

// leaveGroup moves redlock out of its process group into one of its own,
// so that signals to the group it leaves spare it. SIGTTOU is ignored from
// then on: a group of its own is in the background of a terminal, and a
// message written there with "stty tostop" set would stop redlock.
func leaveGroup() error {
	signal.Ignore(syscall.SIGTTOU)
	return syscall.Setpgid(0, 0)
}

// procGroup is the process group that a command leads: the command and
// everything it started that did not leave the group.
type procGroup struct{ pgid int }

func groupOf(p *os.Process) procGroup { return procGroup{pgid: p.Pid} }

// id is the group's id, for messages.
func (g procGroup) id() int { return g.pgid }

// signal sends sig to every process of the group; os.ErrProcessDone when
// none is left.
//
// Once the leader has been reaped, the group id stays reserved as long as
// one member lives; the kernel hands the number out again only after the
// group is empty, and then to a new process, which would have to make
// itself a group leader in the moments between two checks to be hit.
func (g procGroup) signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return errors.New("not a signal of this system")
	}
	err := syscall.Kill(-g.pgid, s)
	if err == syscall.ESRCH {
		return os.ErrProcessDone
	}
	return err
}

// alive reports whether some process of the group still exists. A process
// redlock may not signal (it changed its user) counts as alive: nothing
// can end it, and it must not outlive the lock unnoticed.
func (g procGroup) alive() bool { return syscall.Kill(-g.pgid, 0) != syscall.ESRCH }
