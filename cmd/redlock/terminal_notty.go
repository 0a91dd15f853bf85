//go:build !(linux || darwin || freebsd)

package main

import (
	"io"
	"os/exec"
	"syscall"
)

// terminal is not handed to the command here: the command runs in the
// background of redlock's terminal, if any.
type terminal struct{}

func foregroundTerminal(io.Reader) *terminal { return nil }

func (*terminal) handOver(*syscall.SysProcAttr) {}

func (*terminal) started() {}

func (*terminal) takeBack(*exec.Cmd) error { return nil }

func (*terminal) wait(cmd *exec.Cmd, _ func()) (int, error) { return waitCommand(cmd) }

// interactiveGroup cannot tell an interactive shell's process group here:
// it assumes the worst.
func interactiveGroup(int) bool { return true }
