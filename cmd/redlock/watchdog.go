//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The watchdog enforces, from outside redlock's process, the deadline by
// which the command's process group must be dead: while redlock itself
// cannot run (stopped with SIGSTOP, starved, its extension of the lock
// stuck), nobody extends the lock, and the command must not outlive it.
//
// redlock starts it (its own binary, re-executed as "redlock
// __watchdog") before the command, and talks to it over a pipe, one line
// per message:
//
//	group PGID        the process group to kill
//	kill-at NANOS     kill the group with SIGKILL at this reading of the
//	                  shared clock (sharedNow), unless a later kill-at
//	                  comes first
//	done              the group is empty: exit without killing
//
// When the pipe closes without "done" (redlock died), the watchdog kills
// the group at once: nobody extends the lock any more.
//
// The command must not run before the watchdog knows its group: redlock
// could be stopped right after starting it. So it starts as redlock's own
// binary again ("redlock __exec PATH ARGV..."), in the group it will have,
// which waits for a byte on a gate pipe (its file descriptor 3), sent once
// "group" is written to the watchdog, and then executes the command in its
// place (same process, same group).

// The hidden commands that run redlock as a watchdog, or as the gate
// before a command.
const (
	watchdogCommand = "__watchdog"
	execCommand     = "__exec"
)

// watchdogPoll bounds the watchdog's sleep while a deadline is set: the
// Go runtime's timers stand still while the machine is suspended, the
// shared clock does not, so the watchdog looks at the clock at least this
// often.
const watchdogPoll = 100 * time.Millisecond

// watchdog is redlock's side of a running watchdog.
type watchdog struct {
	cmd    *exec.Cmd
	w      *os.File
	exited chan struct{} // closed when the watchdog process has exited
	err    error         // its end, set before exited is closed
	// stopped is set by the first call of stop.
	stopped bool
}

// startWatchdog starts the watchdog process; env is redlock's
// environment, passed on without REDLOCK_NODES.
func startWatchdog(stderr io.Writer, env []string) (*watchdog, error) {
	self, err := selfBinary()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, watchdogCommand)
	// The read end only: the write end is close-on-exec, in the
	// watchdog and in the command alike, so that redlock's end closes
	// the pipe.
	cmd.Stdin, cmd.Stderr = r, stderr
	// A group of its own: what kills redlock's group (or hold's script's,
	// which redlock shares) must not kill the watchdog with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, envNodes+"=") })
	err = cmd.Start()
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	wd := &watchdog{cmd: cmd, w: w, exited: make(chan struct{})}
	go func() {
		defer close(wd.exited)
		wd.err = cmd.Wait()
		if wd.err == nil {
			wd.err = errors.New("it exited")
		}
	}()
	return wd, nil
}

// selfBinary is the path of redlock's own binary.
func selfBinary() (string, error) {
	if runtime.GOOS == "linux" {
		// The running binary itself, even when its file was replaced
		// (an upgrade) or removed since redlock started.
		return "/proc/self/exe", nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding redlock's own binary: %w", err)
	}
	return self, nil
}

// gate changes cmd so that it starts as "redlock __exec" and waits until
// open(true) is called to execute the command; open(false) makes it exit
// instead. cmd.Path must be resolved already.
func gate(cmd *exec.Cmd) (open func(run bool) error, err error) {
	self, err := selfBinary()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Args = append([]string{self, execCommand, cmd.Path}, cmd.Args...)
	cmd.Path = self
	cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	return func(run bool) error {
		// Ours is no longer needed once the command started (or failed
		// to): only the gate process has it then.
		_ = r.Close()
		if !run {
			return w.Close()
		}
		_, err := w.Write([]byte{1})
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// execMain is redlock as a gate: it waits for the byte on its file
// descriptor 3, then executes args[0] with the arguments args[1:].
// Without the byte (redlock is gone) it exits without running anything.
func (a *app) execMain(args []string) int {
	g := os.NewFile(3, "gate")
	var b [1]byte
	n, _ := g.Read(b[:])
	_ = g.Close()
	if n != 1 || len(args) < 2 {
		return exitFailure
	}
	err := syscall.Exec(args[0], args[1:], os.Environ())
	fmt.Fprintf(a.stderr, "redlock: cannot run %q: %v\n", args[1], err)
	if errors.Is(err, syscall.ENOENT) {
		return exitNotFound
	}
	return exitCannotRun
}

func (wd *watchdog) send(msg string) error {
	if _, err := wd.w.WriteString(msg + "\n"); err != nil {
		return fmt.Errorf("telling the watchdog: %w", err)
	}
	return nil
}

// watch tells the watchdog which process group to kill.
func (wd *watchdog) watch(g procGroup) error { return wd.send("group " + strconv.Itoa(g.pgid)) }

// killAt sets the watchdog's deadline to t.
func (wd *watchdog) killAt(t time.Time) error {
	// The shared clock is read first, the time left second: a pause in
	// between makes the deadline earlier, never later.
	now, err := sharedNow()
	if err != nil {
		return err
	}
	return wd.send("kill-at " + strconv.FormatInt(now+int64(time.Until(t)), 10))
}

// stop tells the watchdog that the group is empty, and waits for it to
// exit. Calls after the first only wait.
func (wd *watchdog) stop() {
	if !wd.stopped {
		wd.stopped = true
		_ = wd.send("done") // a watchdog that exited already is no matter now
		_ = wd.w.Close()
	}
	<-wd.exited
}

// watchdogMain is redlock as a watchdog: it reads messages from in until
// "done", and kills the group when the deadline passes or in ends.
func (a *app) watchdogMain() int {
	// The signals a terminal or a job control shell sends to redlock's
	// process group are redlock's to handle; only the pipe ends the
	// watchdog (and SIGKILL, which the pipe's end then tells redlock).
	signal.Ignore(append(slices.Clone(forwardedSignals), syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)...)
	msgs := make(chan string)
	go func() {
		defer close(msgs)
		sc := bufio.NewScanner(a.stdin)
		for sc.Scan() {
			msgs <- sc.Text()
		}
	}()
	var (
		group    procGroup
		deadline int64
		armed    bool // a group and a deadline are known, and the group is not known to be empty
		killed   bool
	)
	kill := func(why string) {
		err := group.signal(sigKill)
		if !killed && !errors.Is(err, os.ErrProcessDone) {
			fmt.Fprintf(a.stderr, "redlock: watchdog: %s: killed the command's process group (SIGKILL)\n", why)
		}
		killed = true
		if errors.Is(err, os.ErrProcessDone) {
			armed = false
		}
	}
	timer := time.NewTimer(0)
	for {
		var tick <-chan time.Time
		if armed {
			now, err := sharedNow()
			if err != nil {
				fmt.Fprintf(a.stderr, "redlock: watchdog: %v\n", err)
				deadline = now // fail safe: kill now
			}
			left := time.Duration(deadline - now)
			if left <= 0 {
				kill("the lock's validity ends and redlock did not extend it in time (redlock stopped or starved?)")
				left = watchdogPoll // and again, until the group is empty
			}
			timer.Reset(min(left, watchdogPoll))
			tick = timer.C
		}
		select {
		case <-tick:
		case m, ok := <-msgs:
			timer.Stop()
			if !ok {
				// redlock is gone: nobody extends the lock.
				if group.pgid > 0 {
					kill("redlock exited without stopping its watchdog")
				}
				return exitOK
			}
			verb, arg, _ := strings.Cut(m, " ")
			n, err := strconv.ParseInt(arg, 10, 64)
			switch {
			case verb == "done":
				return exitOK
			case err != nil || n <= 0:
			case verb == "group":
				group = procGroup{pgid: int(n)}
				armed = deadline != 0 && !killed
				continue
			case verb == "kill-at":
				deadline = n
				armed = group.pgid > 0 && !killed
				continue
			}
			fmt.Fprintf(a.stderr, "redlock: watchdog: unexpected message %q\n", m)
			if group.pgid > 0 {
				kill("unexpected message")
			}
			return exitFailure
		}
	}
}
