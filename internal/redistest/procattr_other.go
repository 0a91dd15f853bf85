//go:build !linux

package redistest

import "os/exec"

// dieWithTests does nothing here: only Linux has a parent-death signal.
func dieWithTests(*exec.Cmd) {}
