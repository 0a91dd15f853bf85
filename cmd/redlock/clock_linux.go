package main

import (
	"fmt"
	"syscall"
	"unsafe"
)

// clockBoottime is CLOCK_BOOTTIME: CLOCK_MONOTONIC plus the time the
// machine was suspended.
const clockBoottime = 7

// sharedNow reads a clock that redlock and its watchdog, two processes,
// both read: CLOCK_BOOTTIME, which no one can set and which goes on
// counting while the machine is suspended, as the locks' TTLs do on the
// servers.
func sharedNow() (int64, error) {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, fmt.Errorf("clock_gettime(CLOCK_BOOTTIME): %w", errno)
	}
	return ts.Nano(), nil
}
