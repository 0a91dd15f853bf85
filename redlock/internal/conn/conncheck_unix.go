//go:build unix

package conn

import (
	"errors"
	"net"
	"syscall"
)

// quiet reports whether c is open with nothing to read: a non-blocking peek
// finds no byte and no end of stream. A connection that cannot be looked at
// (one a custom dialer wrapped, TLS) counts as quiet. The peek runs under
// Control, not Read: it takes no read lock and leaves the socket's deadlines
// as they are, so it can never wait on, nor change, a read under way.
func quiet(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	ok = true
	var b [1]byte
	err = raw.Control(func(fd uintptr) {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read: EAGAIN. Anything else (a byte, the end of the
		// stream, a reset) means the connection is not what a new batch
		// can go out on.
		ok = errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
	})
	// An error of Control itself means the socket could not be looked at.
	return ok || err != nil
}
