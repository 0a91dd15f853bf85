package main

import "syscall"

// setParentDeathSignal has the kernel kill the command if redlock dies
// without a chance to stop it (SIGKILL, a crash): nobody would extend the
// lock any more, and it would expire under the running command. (The kernel
// sends it when the thread that started the command exits; Go ends threads
// only for goroutines that locked one, which redlock does not do.)
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
