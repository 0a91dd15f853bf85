//go:build !linux

package pgtest

import (
	"os/exec"
	"syscall"
)

// setProcAttr runs cmd as cred (nil: as this process); only Linux has a
// parent-death signal.
func setProcAttr(cmd *exec.Cmd, cred *syscall.Credential) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
}
