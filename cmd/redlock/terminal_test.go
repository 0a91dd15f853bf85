//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// ptyProc is a process run with a pseudo-terminal as its controlling
// terminal and standard input, output and error, as in a terminal window.
type ptyProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	master *os.File
	out    *lines // what the terminal shows, standard output and error
	done   chan struct{}
	code   int
}

// openPTY opens a new pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = master.Close() })
	var (
		unlock int32
		n      uint32
	)
	// Control leaves the file in non-blocking mode (Fd would not), so that
	// closing it ends a pending Read.
	rc, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) {
		ioctlErr = ioctl(fd, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
		if ioctlErr == nil {
			ioctlErr = ioctl(fd, syscall.TIOCGPTN, unsafe.Pointer(&n))
		}
	}); err != nil {
		t.Fatal(err)
	}
	if ioctlErr != nil {
		t.Fatalf("setting up the pseudo-terminal: %v", ioctlErr)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

func ioctl(fd, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// startPTY runs argv in a new session whose controlling terminal is a new
// pseudo-terminal, in its foreground, with env on top of a minimal
// environment. The process is killed and waited for at cleanup.
func startPTY(t *testing.T, env []string, argv ...string) *ptyProc {
	t.Helper()
	master, slave := openPTY(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GORACE=atexit_sleep_ms=0"}, env...)
	cmd.Dir = t.TempDir()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A session of its own, with the terminal (its standard input) as
	// the controlling terminal: its process group is the foreground one.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once the process and its children have closed the terminal, reads
	// on the master end with EIO.
	if err := slave.Close(); err != nil {
		t.Fatal(err)
	}
	p := &ptyProc{t: t, cmd: cmd, master: master, out: newLines(), done: make(chan struct{})}
	readerDone := make(chan struct{})
	go p.out.read(master, func() { close(readerDone) })
	go func() {
		err := cmd.Wait()
		p.code = commandExitCode(cmd.ProcessState)
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.code = -1000
		}
		<-readerDone
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			_ = master.Close()
			<-p.done
		}
	})
	return p
}

// typeIn writes s to the terminal, as if typed on its keyboard.
func (p *ptyProc) typeIn(s string) {
	p.t.Helper()
	if _, err := p.master.WriteString(s); err != nil {
		p.t.Fatal(err)
	}
}

// expect waits for the process to exit and fails the test unless it exited
// with code.
func (p *ptyProc) expect(code int) {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(waitLimit):
		p.t.Fatalf("%s still running after %v; the terminal shows:\n%s", strings.Join(p.cmd.Args, " "), waitLimit, p.out)
	}
	if p.code != code {
		p.t.Fatalf("%s exited with %d, want %d; the terminal shows:\n%s", strings.Join(p.cmd.Args, " "), p.code, code, p.out)
	}
}

// An interactive command reads from the terminal, and Ctrl-C on the
// terminal ends it; the lock is held meanwhile and released at the end.
func TestRunInteractive(t *testing.T) {
	t.Parallel()
	key := t.Name()
	p := startPTY(t, sharedEnv(), binary, "run", key, "--", "sh", "-c", `echo ready; read x; echo "got $x"; read y; echo "not interrupted $y"`)
	p.out.await(t, "ready")
	p.typeIn("hello\n")
	p.out.await(t, "got hello")
	held := 0
	for _, v := range keyOn(t, sharedNodes, key) {
		if v != "" {
			held++
		}
	}
	if held < 2 {
		t.Errorf("the lock is on %d of 3 nodes while the command runs", held)
	}
	p.typeIn("\x03") // Ctrl-C: SIGINT to the terminal's foreground group
	p.expect(128 + int(syscall.SIGINT))
	if s := p.out.String(); strings.Contains(s, "not interrupted") {
		t.Errorf("the command went on after Ctrl-C:\n%s", s)
	}
	assertFree(t, sharedNodes, key)
}

// Ctrl-Z does not leave the command suspended with the lock held: it is
// resumed at once, and reads on. redlock says so on the terminal while
// outside its foreground, with "stty tostop" set: that does not stop
// redlock.
func TestRunInteractiveSuspendResumes(t *testing.T) {
	t.Parallel()
	key := t.Name()
	p := startPTY(t, sharedEnv(), binary, "run", key, "--", "sh", "-c", `stty tostop; echo ready; read x; echo "got $x"`)
	p.out.await(t, "ready")
	p.typeIn("\x1a") // Ctrl-Z: SIGTSTP to the terminal's foreground group
	p.out.await(t, "resuming the suspended command")
	p.typeIn("hello\n")
	p.out.await(t, "got hello")
	p.expect(0)
	assertFree(t, sharedNodes, key)
}

// A script that runs redlock and then reads the terminal itself finds the
// terminal given back to it.
func TestRunGivesTerminalBack(t *testing.T) {
	t.Parallel()
	key := t.Name()
	script := `"$0" run "$1" -- sh -c 'echo ready; read x; echo "got-$x"'; read y; echo "after-$y"`
	p := startPTY(t, sharedEnv(), "sh", "-c", script, binary, key)
	p.out.await(t, "ready")
	p.typeIn("a\n")
	p.out.await(t, "got-a")
	p.typeIn("b\n")
	p.out.await(t, "after-b")
	p.expect(0)
	assertFree(t, sharedNodes, key)
}

// redlock in the background of a terminal leaves the terminal to the
// shell: the command does not get it.
func TestRunInBackgroundKeepsOffTerminal(t *testing.T) {
	t.Parallel()
	key := t.Name()
	// With job control (set -m), "&" starts redlock in a process group of
	// its own, in the background, with the terminal as its standard input.
	script := `set -m; "$0" run "$1" -- sh -c 'echo "bg-ran"' & wait $!; echo "bg-exit-$?"; read y; echo "shell-read-$y"`
	p := startPTY(t, sharedEnv(), "sh", "-c", script, binary, key)
	p.out.await(t, "bg-exit-0")
	p.typeIn("c\n")
	p.out.await(t, "shell-read-c")
	p.expect(0)
}
