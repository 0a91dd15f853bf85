//go:build unix && !linux

package main

import "syscall"

// setParentDeathSignal does nothing here: only Linux can kill the command
// when redlock dies.
func setParentDeathSignal(*syscall.SysProcAttr) {}
