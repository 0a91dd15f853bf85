//go:build unix

package harness

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) this process has used
// so far, every thread counted; the servers it started are processes of
// their own and count apart.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
