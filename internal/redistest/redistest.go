// Package redistest runs real redis-server processes on loopback ports of
// their own for tests, benchmarks and the chaos suite. It has no test-only
// dependencies, so the bench and integration modules use it as well.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// InstallHint tells a person how to get redis-server.
const InstallHint = "redis-server not found on PATH: `make redis` installs it (or `apt-get install -y redis-server` on Debian/Ubuntu, `brew install redis` on macOS)"

// Options configure a server.
type Options struct {
	// Persistent turns on the append-only file with appendfsync always, so a
	// killed server comes back with every acknowledged write.
	Persistent bool
	// Dir is the server's working directory; a fresh temporary one by default.
	Dir string
	// Binary is the redis-server executable; "redis-server" on PATH by default.
	Binary string
	// Args are extra redis-server arguments, given after the defaults so
	// that they override them: persistence ("--save", "3600 1",
	// "--appendfsync", "everysec"), memory ("--maxmemory", "4mb",
	// "--maxmemory-policy", "volatile-lru"), replication ("--replicaof",
	// host, port).
	Args []string
	// Env is extra environment for the process, such as LD_PRELOAD and
	// FAKETIME for libfaketime.
	Env []string

	// Set by StartCluster and StartSentinelGroup.
	config     string // written to configFile in Dir at Start and given first
	configFile string
	bus        bool   // cluster mode: a second reserved port for the cluster bus
	readyLine  string // what the server prints once it accepts connections
}

// Server is one redis-server process. Its port stays the same across
// restarts, and stays reserved while the server is killed: until Close, or
// for StartT until the test's cleanup, no other server, forwarder or
// FreePort of this or another process gets it, so a killed server's address
// stays dead.
type Server struct {
	Addr string
	Port int
	// BusPort is a cluster node's cluster-bus port (cluster-port), reserved
	// as Port is; 0 for other servers.
	BusPort int

	opts    Options
	tempDir bool
	held    bool // StartT releases the port at the test's cleanup, not Close

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    *tailBuffer
	paused bool
}

// Start starts a redis-server on a loopback port reserved for it (see
// Server) and waits until it accepts connections.
func Start(opts Options) (*Server, error) {
	if opts.Binary == "" {
		opts.Binary = "redis-server"
	}
	if _, err := exec.LookPath(opts.Binary); err != nil {
		return nil, errors.New(InstallHint)
	}
	if opts.readyLine == "" {
		opts.readyLine = "Ready to accept connections"
	}
	s := &Server{opts: opts}
	if s.opts.Dir == "" {
		dir, err := os.MkdirTemp("", "redistest-")
		if err != nil {
			return nil, err
		}
		s.opts.Dir, s.tempDir = dir, true
	}
	if s.opts.config != "" {
		// The server rewrites its own file (Sentinel does): keep it
		// across restarts, written once.
		if err := os.WriteFile(s.configPath(), []byte(s.opts.config), 0o600); err != nil {
			s.cleanupDir()
			return nil, err
		}
	}
	// A program that does not use this package can take a port between
	// our probe and the server's bind; try a few.
	var err error
	for range 5 {
		var port, bus int
		if port, err = takePort(); err != nil {
			break
		}
		if s.opts.bus {
			if bus, err = takePort(); err != nil {
				err = errors.Join(err, releasePort(port))
				break
			}
		}
		s.Port, s.BusPort = port, bus
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = s.start(); err == nil {
			return s, nil
		}
		if rerr := s.releasePorts(); rerr != nil {
			err = errors.Join(err, rerr)
			break
		}
	}
	s.cleanupDir()
	return nil, err
}

// releasePorts releases the server's client port and bus port.
func (s *Server) releasePorts() error {
	err := releasePort(s.Port)
	if s.BusPort != 0 {
		err = errors.Join(err, releasePort(s.BusPort))
	}
	return err
}

func (s *Server) configPath() string { return filepath.Join(s.opts.Dir, s.opts.configFile) }

// StartN starts n servers; on failure it stops those already started.
func StartN(n int, opts Options) ([]*Server, error) {
	servers := make([]*Server, 0, n)
	for range n {
		o := opts
		o.Dir = ""
		s, err := Start(o)
		if err != nil {
			for _, s := range servers {
				_ = s.Close()
			}
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// StartT starts n servers for a test and closes them at cleanup. Their
// ports stay reserved until then, even if the test closes a server first.
func StartT(t testing.TB, n int, opts Options) []*Server {
	t.Helper()
	servers, err := StartN(n, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		s.mu.Lock()
		s.held = true
		s.mu.Unlock()
	}
	t.Cleanup(func() {
		for _, s := range servers {
			if err := s.Close(); err != nil {
				t.Errorf("closing redis-server %s: %v", s.Addr, err)
			}
			if err := s.releasePorts(); err != nil {
				t.Errorf("releasing the ports of %s: %v", s.Addr, err)
			}
		}
	})
	return servers
}

// ClientsT returns one go-redis client per server, closed at cleanup. The
// clients honour context deadlines and do not retry, so a dead node fails
// fast instead of being retried behind the lock's back.
func ClientsT(t testing.TB, servers []*Server) []*redis.Client {
	t.Helper()
	clients := make([]*redis.Client, len(servers))
	for i, s := range servers {
		c := s.NewClient()
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	return clients
}

// NewClient returns a go-redis client for the server, set up for lock use:
// context deadlines honoured, no command retries.
func (s *Server) NewClient() *redis.Client { return newClient(s.Addr) }

func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		Protocol:              2,
		DisableIdentity:       true,
	})
}

func (s *Server) args() []string {
	var a []string
	if s.opts.config != "" {
		a = append(a, s.configPath())
	}
	a = append(a,
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--dir", s.opts.Dir,
		"--protected-mode", "no",
		"--daemonize", "no",
		"--logfile", "",
		"--save", "",
	)
	if s.BusPort != 0 {
		a = append(a, "--cluster-port", strconv.Itoa(s.BusPort))
	}
	if s.opts.Persistent {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	return append(a, s.opts.Args...)
}

func (s *Server) start() error {
	cmd := exec.Command(s.opts.Binary, s.args()...)
	dieWithTests(cmd)
	if len(s.opts.Env) > 0 {
		cmd.Env = append(os.Environ(), s.opts.Env...)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	log := &tailBuffer{}
	ready := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			log.add(line)
			if !signalled && strings.Contains(line, s.opts.readyLine) {
				close(ready)
				signalled = true
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		return fmt.Errorf("redis-server on port %d exited at start:\n%s", s.Port, log.String())
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("redis-server on port %d not ready after 10s:\n%s", s.Port, log.String())
	}
	s.mu.Lock()
	s.cmd, s.exited, s.log = cmd, exited, log
	s.mu.Unlock()
	return nil
}

// Kill sends SIGKILL and waits for the process to end. Without persistence
// the server forgets everything.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd, s.paused = nil, false
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	// A stopped process must be continued to die promptly on some kernels.
	_ = cmd.Process.Signal(syscall.SIGCONT)
	if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-exited
	return nil
}

// Restart starts the server again on the same port and directory (after
// Kill, or kills it first). With Persistent it reloads its append-only file.
func (s *Server) Restart() error {
	if err := s.Kill(); err != nil {
		return err
	}
	var err error
	// The kernel may hold the port briefly; retry a few times.
	for range 20 {
		if err = s.start(); err == nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		<-ctx.Done()
		cancel()
	}
	return err
}

// Pause stops the process with SIGSTOP: it keeps its connections but answers
// nothing, and its keys do not expire while it is stopped.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP, true) }

// Resume continues a paused process.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

// answering reports whether the process runs and is not paused: whether
// waiting for its answer makes sense.
func (s *Server) answering() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil && !s.paused
}

// Running reports whether the process is up (paused counts as up).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

func (s *Server) signal(sig os.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("redis-server %s is not running", s.Addr)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return err
	}
	s.paused = paused
	return nil
}

// Close kills the server, removes its temporary directory and releases its
// port (for StartT, the test's cleanup releases it).
func (s *Server) Close() error {
	err := s.Kill()
	s.cleanupDir()
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	if !held {
		err = errors.Join(err, s.releasePorts())
	}
	return err
}

// Log returns the last lines the server printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log == nil {
		return ""
	}
	return s.log.String()
}

func (s *Server) cleanupDir() {
	if s.tempDir {
		_ = os.RemoveAll(filepath.Clean(s.opts.Dir))
	}
}

// Role returns the server's replication role, "master" or "slave" (ROLE).
func (s *Server) Role(ctx context.Context) (string, error) {
	cl := s.NewClient()
	defer cl.Close()
	r, err := cl.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(r) == 0 {
		return "", fmt.Errorf("redistest: empty ROLE reply from %s", s.Addr)
	}
	role, ok := r[0].(string)
	if !ok {
		return "", fmt.Errorf("redistest: ROLE reply %v from %s", r, s.Addr)
	}
	return role, nil
}

// RunID returns the run_id of the server's process (INFO server).
func (s *Server) RunID(ctx context.Context) (string, error) {
	cl := s.NewClient()
	defer cl.Close()
	info, err := cl.Info(ctx, "server").Result()
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if id, ok := strings.CutPrefix(line, "run_id:"); ok {
			return id, nil
		}
	}
	return "", fmt.Errorf("redistest: no run_id in INFO server of %s", s.Addr)
}

// FreePort returns a loopback port where nothing listens, reserved for the
// rest of the process: no server, forwarder or FreePort of this or another
// process gets it while this one lives, so it stays dead unless the caller
// listens on it.
func FreePort() (int, error) { return takePort() }

// tailBuffer keeps the last lines of a server's output for error messages.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *tailBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
	if len(b.lines) > 40 {
		b.lines = b.lines[len(b.lines)-40:]
	}
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// ConnectionsReceived is the count of connections cl's server has accepted
// since it started (INFO stats' total_connections_received).
func ConnectionsReceived(t testing.TB, cl *redis.Client) int {
	t.Helper()
	info, err := cl.Info(t.Context(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO stats shows no total_connections_received")
	return 0
}
