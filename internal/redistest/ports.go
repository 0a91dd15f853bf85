package redistest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Ports. A test that kills a server, or points a client at a port where
// nobody listens, counts on that address staying dead until it ends. The
// kernel's "any free port" cannot promise that: test packages run as
// parallel processes, tests within one run in parallel, and the kernel hands
// a port that was just freed to the next bind or outgoing connection that
// asks. So the package hands out ports itself:
//
//   - from a range outside the kernel's ephemeral ports, so that no
//     connection's local port and no bind to port 0 takes one;
//   - each port reserved across processes by a lock on one byte of a shared
//     file in os.TempDir() (the byte at the port's offset), which the kernel
//     drops when the process ends, however it ends;
//   - never twice in one process, even after its reservation is released.
//
// A server's port is released by Close, or for StartT at the test's cleanup;
// a forwarder's, a hung listener's and FreePort's when the process ends.

// portsFile is the shared file whose bytes reserve ports.
const portsFile = "redistest-ports.lock"

// portFloor is the lowest port handed out: below it live the ports of
// services a developer may run.
const portFloor = 20000

var ports struct {
	mu     sync.Mutex
	err    error    // from setting up; sticks
	file   *os.File // never closed: closing it would drop every reservation
	lo, hi int      // the range handed out, [lo, hi)
	next   int      // where the search goes on
	used   map[int]bool
}

// reservePort reserves a port that no other process using this package
// holds and that this process has never handed out.
func reservePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.file == nil && ports.err == nil {
		ports.err = setUpPorts()
	}
	if ports.err != nil {
		return 0, ports.err
	}
	for range ports.hi - ports.lo {
		p := ports.next
		if ports.next++; ports.next == ports.hi {
			ports.next = ports.lo
		}
		if ports.used[p] {
			continue
		}
		ok, err := lockPort(p, syscall.F_WRLCK)
		if err != nil {
			return 0, err
		}
		if ok {
			ports.used[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("redistest: every port in %d-%d is held by this or another process", ports.lo, ports.hi-1)
}

// releasePort lets other processes have p. This process never hands it out
// again.
func releasePort(p int) error {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	_, err := lockPort(p, syscall.F_UNLCK)
	return err
}

// lockPort sets (F_WRLCK) or drops (F_UNLCK) the lock on p's byte without
// waiting; ok is false when another process holds it.
func lockPort(p int, typ int16) (ok bool, err error) {
	lk := syscall.Flock_t{Type: typ, Whence: io.SeekStart, Start: int64(p), Len: 1}
	err = syscall.FcntlFlock(ports.file.Fd(), syscall.F_SETLK, &lk)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("redistest: reserving port %d in %s: %w", p, ports.file.Name(), err)
	}
	return true, nil
}

func setUpPorts() error {
	name := filepath.Join(os.TempDir(), portsFile)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	switch {
	case err == nil:
		// Past the umask: every user's tests reserve ports in one file.
		if err := f.Chmod(0o666); err != nil {
			return errors.Join(fmt.Errorf("redistest: %w", err), f.Close())
		}
	case errors.Is(err, fs.ErrExist):
		f, err = os.OpenFile(name, os.O_RDWR, 0)
	}
	if err != nil {
		return fmt.Errorf("redistest: the file that reserves ports across processes: %w", err)
	}
	lo, hi := portRange()
	ports.file, ports.lo, ports.hi = f, lo, hi
	// Processes start their search at different places, so that a port
	// another process just released is seldom the next one taken.
	ports.next = lo + rand.IntN(hi-lo)
	ports.used = map[int]bool{}
	return nil
}

// portRange returns the ports to hand out, [lo, hi): the larger stretch
// from portFloor up to the kernel's ephemeral range or from above it to the
// last port, when that stretch holds at least a thousand ports.
func portRange() (lo, hi int) {
	elo, ehi := ephemeralRange()
	below, above := elo-portFloor, 65535-ehi
	switch {
	case below >= above && below >= 1000:
		return portFloor, elo
	case above > below && above >= 1000:
		return ehi + 1, 65536
	default:
		return portFloor, 65536
	}
}

// ephemeralRange returns the kernel's range for local ports chosen by the
// kernel, inclusive: Linux's setting, or the IANA range elsewhere.
func ephemeralRange() (lo, hi int) {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if _, err := fmt.Sscan(string(raw), &lo, &hi); err == nil && 0 < lo && lo <= hi && hi <= 65535 {
			return lo, hi
		}
	}
	return 49152, 65535
}

// takePort reserves a port where nothing listens now, as far as a probe
// listener can tell: a program that does not use this package may listen on
// a port in the range.
func takePort() (int, error) {
	ln, err := listenReserved()
	if err != nil {
		return 0, err
	}
	return ln.Addr().(*net.TCPAddr).Port, ln.Close()
}

// listenReserved listens on a loopback port it reserves, skipping ports
// that something else listens on.
func listenReserved() (net.Listener, error) {
	var err error
	for range 100 {
		var p int
		if p, err = reservePort(); err != nil {
			return nil, err
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			return ln, nil
		}
		if rerr := releasePort(p); rerr != nil {
			return nil, rerr
		}
	}
	return nil, err
}
