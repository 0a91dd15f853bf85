package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/internal/redistest"
)

// binary is the redlock command built for the tests (with -race when the
// tests run with it).
var binary string

// sharedNodes are three servers for the tests that do not kill nodes; each
// test uses its own keys.
var sharedNodes []*redistest.Server

// waitLimit bounds every wait for the command under test, so that a bug
// fails the test instead of hanging it.
const waitLimit = 30 * time.Second

// helperEnv makes the test binary play a command under redlock instead of
// running the tests; its value says which.
const helperEnv = "REDLOCK_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	code, err := testMain(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(redistest.LeakCheck(code))
}

// helper is the test binary as a command under redlock.
func helper(mode string) int {
	switch mode {
	case "signal":
		// Print "ready" once listening, then report the first signal
		// and exit with 5.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		fmt.Println("ready")
		fmt.Println("got", <-sigs)
		return 5
	case "signal-at":
		// As "signal", and say when the signal came: "got SIG at
		// UNIX-NANOSECONDS".
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		fmt.Println("ready")
		sig := <-sigs
		fmt.Println("got", sig, "at", time.Now().UnixNano())
		return 5
	case "dead":
		// Check that every process whose pid is in the file os.Args[1]
		// is dead: print "alive PID" for each that is not, then "dead N
		// of M".
		return checkDead(os.Args[1])
	}
	fmt.Fprintln(os.Stderr, "unknown helper", mode)
	return 2
}

// helperCommand returns the command line and environment that run the test
// binary as helper mode.
func helperCommand(t *testing.T, mode string) (argv, env []string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{self}, []string{helperEnv + "=" + mode}
}

func testMain(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "redlock-cmd-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "redlock")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building redlock: %v\n%s", err, out)
	}
	sharedNodes, err = redistest.StartN(3, redistest.Options{})
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, s := range sharedNodes {
			_ = s.Close()
		}
	}()
	return m.Run(), nil
}

// nodesURL returns the --nodes value for servers.
func nodesURL(servers []*redistest.Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = "redis://" + s.Addr
	}
	return strings.Join(urls, ",")
}

// proc is one run of the redlock binary.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *lines
	stderr *lines
	done   chan struct{}
	code   int
}

// lines collects what a process writes, line by line, and lets a test wait
// for a line.
type lines struct {
	mu    sync.Mutex
	all   []string
	added chan struct{} // closed and replaced on every new line
	eof   bool
}

func newLines() *lines { return &lines{added: make(chan struct{})} }

func (l *lines) read(r io.Reader, done func()) {
	defer done()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l.mu.Lock()
		l.all = append(l.all, sc.Text())
		close(l.added)
		l.added = make(chan struct{})
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.eof = true
	close(l.added)
	l.mu.Unlock()
}

// String returns everything read so far.
func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// await waits for a line that contains want and returns it.
func (l *lines) await(t *testing.T, want string) string {
	t.Helper()
	timeout := time.NewTimer(waitLimit)
	defer timeout.Stop()
	for i := 0; ; {
		l.mu.Lock()
		for ; i < len(l.all); i++ {
			if strings.Contains(l.all[i], want) {
				line := l.all[i]
				l.mu.Unlock()
				return line
			}
		}
		eof, added := l.eof, l.added
		l.mu.Unlock()
		if eof {
			t.Fatalf("output ended without a line containing %q:\n%s", want, l)
		}
		select {
		case <-added:
		case <-timeout.C:
			t.Fatalf("no line containing %q after %v:\n%s", want, waitLimit, l)
		}
	}
}

// start runs redlock with args and env (on top of a minimal environment
// without any REDLOCK_ variable); the command's standard input is a pipe the
// test controls. The process is killed and waited for at cleanup.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startProgram(t, env, binary, args...)
}

// startProgram is start for any program. It leads a process group of its
// own: a "redlock hold" it starts must not take the test's group for its
// script's.
func startProgram(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The race detector's runtime waits a second at exit unless told not
	// to; races still fail the run (exit code 66).
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GORACE=atexit_sleep_ms=0"}, env...)
	cmd.Dir = t.TempDir()
	p := &proc{t: t, cmd: cmd, stdout: newLines(), stderr: newLines(), done: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child has its own copies of the write ends; ours must go, or
	// the readers would never see the end of the output.
	_ = outW.Close()
	_ = errW.Close()
	var readers sync.WaitGroup
	readers.Add(2)
	go p.stdout.read(outR, readers.Done)
	go p.stderr.read(errR, readers.Done)
	go func() {
		err := cmd.Wait()
		p.code = commandExitCode(cmd.ProcessState)
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.code = -1000
		}
		// The command's children may hold the pipes a little longer;
		// the output is complete once both readers are done.
		readers.Wait()
		_ = outR.Close()
		_ = errR.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for redlock to exit and returns its exit code.
func (p *proc) wait() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(waitLimit):
		p.t.Fatalf("redlock %s still running after %v\nstdout:\n%s\nstderr:\n%s", strings.Join(p.cmd.Args[1:], " "), waitLimit, p.stdout, p.stderr)
	}
	return p.code
}

// expect waits for redlock to exit and fails the test unless it exited with
// code.
func (p *proc) expect(code int) {
	p.t.Helper()
	if got := p.wait(); got != code {
		p.t.Fatalf("redlock %s exited with %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(p.cmd.Args[1:], " "), got, code, p.stdout, p.stderr)
	}
}

// loseLock kills the first two of servers, a majority of three, so that
// redlock's lock is lost, and waits for it to exit saying so with want.
func (p *proc) loseLock(servers []*redistest.Server, want string) {
	p.t.Helper()
	for _, s := range servers[:2] {
		if err := s.Kill(); err != nil {
			p.t.Fatal(err)
		}
	}
	p.expect(exitLost)
	p.stderr.await(p.t, want)
}

// release lets a command that waits on its standard input ("read x") end.
func (p *proc) release() {
	p.t.Helper()
	// A process that has exited already had its stdin closed by
	// exec.Cmd.Wait, which the proc's goroutine may have called first.
	if err := p.stdin.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		p.t.Fatal(err)
	}
}

// redlockRun runs redlock to the end and returns its exit code and output.
func redlockRun(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := start(t, env, args...)
	p.release()
	code = p.wait()
	return code, p.stdout.String(), p.stderr.String()
}

// keyOn returns key's raw value on each server ("" when missing).
func keyOn(t *testing.T, servers []*redistest.Server, key string) []string {
	t.Helper()
	out := make([]string, len(servers))
	for i, s := range servers {
		c := s.NewClient()
		v, err := c.Get(t.Context(), key).Result()
		_ = c.Close()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("GET %s on %s: %v", key, s.Addr, err)
		}
		out[i] = v
	}
	return out
}

// keyOnAll is keyOn once key is on every server, or after two seconds: a
// lock is granted at a majority, and the call to a node it did not wait for
// may still be on its way.
func keyOnAll(t *testing.T, servers []*redistest.Server, key string) []string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		vs := keyOn(t, servers, key)
		if !slices.Contains(vs, "") || time.Now().After(deadline) {
			return vs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// assertFree fails unless key is gone from every server.
func assertFree(t *testing.T, servers []*redistest.Server, key string) {
	t.Helper()
	for i, v := range keyOn(t, servers, key) {
		if v != "" {
			t.Errorf("key %q still on node %d: %q", key, i, v)
		}
	}
}

// assertReleased fails unless key is free on a majority of servers, so that
// the next run obtains it at once. It is weaker than assertFree on purpose:
// with a command that ends within a millisecond, the release can reach a
// node before the acquire that was still in flight there, which then leaves
// its key on that one node until its TTL (the library's to fix).
func assertReleased(t *testing.T, servers []*redistest.Server, key string) {
	t.Helper()
	held := 0
	for _, v := range keyOn(t, servers, key) {
		if v != "" {
			held++
		}
	}
	if held > len(servers)/2 {
		t.Errorf("key %q still on %d of %d nodes", key, held, len(servers))
	}
}

// pttl returns key's remaining TTL on a server.
func pttl(t *testing.T, s *redistest.Server, key string) time.Duration {
	t.Helper()
	c := s.NewClient()
	d, err := c.PTTL(context.Background(), key).Result()
	_ = c.Close()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
