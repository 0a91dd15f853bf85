package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithTests has the kernel kill the server when the test binary dies,
// even without its cleanups (a test that times out panics and runs none):
// servers left behind would load the machine for every later run.
func dieWithTests(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
