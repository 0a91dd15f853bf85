//go:build unix

package conn

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// Looking at a socket that another goroutine is reading neither waits for
// that read nor changes its deadline: a worker that looked at the wrong
// socket once waited forever, and the read it had stripped of its deadline
// with it.
func TestQuietLeavesAReadUnderWayAlone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()

	const deadline = 300 * time.Millisecond
	if err := c.SetReadDeadline(time.Now().Add(deadline)); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := c.Read(b[:])
		read <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the read block
	looked := make(chan bool, 1)
	go func() { looked <- quiet(c) }()
	select {
	case q := <-looked:
		if !q {
			t.Error("an open socket with nothing to read: not quiet")
		}
	case <-time.After(deadline / 2):
		t.Fatal("quiet waited for the read under way")
	}
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the read ended with %v, want its deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read outlived its deadline: quiet cleared it")
	}
}
