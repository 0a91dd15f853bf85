//go:build linux || darwin || freebsd

package main

import (
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"unsafe"
)

// terminal is the controlling terminal that redlock hands to the command
// while it runs, so that an interactive command can read from it and the
// keys that send signals (Ctrl-C, Ctrl-\) reach the command.
type terminal struct {
	f    *os.File
	pgrp int // redlock's process group, which gets the terminal back
	// ignoring is set while redlock ignores SIGTTOU, which it did not
	// before.
	ignoring bool
}

// foregroundTerminal returns stdin as a terminal to hand to the command:
// when it is redlock's controlling terminal and redlock's process group is
// in its foreground. It returns nil otherwise: not a terminal, or redlock
// runs as a background job, which must not take the terminal from the
// shell.
func foregroundTerminal(stdin io.Reader) *terminal {
	f, ok := stdin.(*os.File)
	if !ok {
		return nil
	}
	var fg int32
	// TIOCGPGRP fails (ENOTTY) unless f is our controlling terminal.
	if ioctlPgrp(f.Fd(), syscall.TIOCGPGRP, &fg) != nil || int(fg) != syscall.Getpgrp() {
		return nil
	}
	return &terminal{f: f, pgrp: int(fg)}
}

// handOver has the command's process group put in the terminal's
// foreground as the command starts (by the child, before it runs the
// command, so no signal is lost in between).
func (t *terminal) handOver(attr *syscall.SysProcAttr) {
	if t == nil {
		return
	}
	attr.Foreground = true
	attr.Ctty = int(t.f.Fd())
}

// started is called once the command runs with the terminal. From then
// on, until takeBack, redlock is outside the terminal's foreground, and
// ignores SIGTTOU: a write to the terminal with "stty tostop" set would stop
// redlock with it, and nobody would extend the lock; and takeBack needs it
// ignored. It is not ignored sooner: the command would inherit that.
func (t *terminal) started() {
	if t == nil || signal.Ignored(syscall.SIGTTOU) {
		return
	}
	signal.Ignore(syscall.SIGTTOU)
	t.ignoring = true
}

// takeBack puts redlock's process group back in the terminal's foreground,
// once the command has exited (or failed to start: cmd.Process is nil then):
// a parent that has no job control (a script that runs redlock, then reads
// the terminal) expects to find it there. It also releases the process
// that wait reaped.
func (t *terminal) takeBack(cmd *exec.Cmd) error {
	if t == nil {
		return nil
	}
	if cmd.Process != nil {
		// Only a handle to close: the process was reaped by wait.
		_ = cmd.Process.Release()
	}
	// A process outside the foreground that sets it gets SIGTTOU, which
	// stops it, unless the signal is ignored (see started); a command that
	// failed to start leaves it as it was.
	if t.ignoring {
		defer signal.Reset(syscall.SIGTTOU)
	} else if !signal.Ignored(syscall.SIGTTOU) {
		signal.Ignore(syscall.SIGTTOU)
		defer signal.Reset(syscall.SIGTTOU)
	}
	pgrp := int32(t.pgrp)
	return ioctlPgrp(t.f.Fd(), syscall.TIOCSPGRP, &pgrp)
}

// wait waits for the command to exit and returns its exit code (128+N
// when signal N ended it). A command that Ctrl-Z suspended (SIGTSTP) is
// resumed at once, after a call to suspended: a suspended command would
// keep the lock from everyone, and redlock cannot suspend itself instead
// (the shell would see it stopped), since nobody would extend the lock
// then. Other stops (SIGSTOP) are left alone.
func (t *terminal) wait(cmd *exec.Cmd, suspended func()) (int, error) {
	if t == nil {
		return waitCommand(cmd)
	}
	// The command is reaped here, not by cmd.Wait, which cannot report
	// stops. Its standard streams are files (see app.terminal): no copying
	// goroutine is left for cmd.Wait to collect. takeBack releases the
	// process once nothing signals it any more.
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WUNTRACED, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return exitFailure, err
		case ws.Stopped():
			if ws.StopSignal() == syscall.SIGTSTP {
				suspended()
				if err := signalGroup(cmd.Process, syscall.SIGCONT); err != nil {
					return exitFailure, err
				}
			}
			continue
		case ws.Signaled():
			return 128 + int(ws.Signal()), nil
		}
		return ws.ExitStatus(), nil
	}
}

// interactiveGroup reports whether the process group pgid is the one of
// an interactive shell: the foreground group of redlock's controlling
// terminal, led by the session's leader (the shell the terminal started).
// A script run from such a shell has a group of its own; one run by a
// shell without job control, or typed at it, has the shell's.
func interactiveGroup(pgid int) bool {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false // no controlling terminal
	}
	defer func() { _ = tty.Close() }()
	var fg int32
	if ioctlPgrp(tty.Fd(), syscall.TIOCGPGRP, &fg) != nil {
		return true // a terminal that cannot say: assume the worst
	}
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	return errno != 0 || int(fg) == pgid && int(sid) == pgid
}

func ioctlPgrp(fd uintptr, req uintptr, pgrp *int32) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(unsafe.Pointer(pgrp))); errno != 0 {
		return errno
	}
	return nil
}
