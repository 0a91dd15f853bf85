package pgtest

import (
	"os/exec"
	"syscall"
)

// setProcAttr runs cmd as cred (nil: as this process) and has the kernel
// kill it when the test binary dies, even without its cleanups.
func setProcAttr(cmd *exec.Cmd, cred *syscall.Credential) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
}
