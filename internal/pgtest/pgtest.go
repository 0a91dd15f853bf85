// Package pgtest runs real PostgreSQL servers for tests and benchmarks:
// each in a fresh temporary directory, on a loopback port of its own, with
// its socket in that directory, killed on cleanup. It imports no database
// driver: the tests that use it bring theirs.
//
// initdb and postgres refuse to run as root; as root, the server runs as
// the "postgres" user the distribution's package creates.
package pgtest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// InstallHint tells a person how to get PostgreSQL.
const InstallHint = "PostgreSQL's initdb not found (on PATH or under /usr/lib/postgresql): `make postgres` installs it (or `apt-get install -y postgresql` on Debian/Ubuntu)"

// Server is one PostgreSQL server process, its data in a temporary
// directory, trusting every local connection as user "postgres".
type Server struct {
	Port int
	Dir  string

	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	log    []string
}

// URL returns a connection URL of database db ("postgres" exists), for
// pgx's or lib/pq's database/sql driver.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// binDir returns the directory of initdb and postgres: initdb's on PATH,
// or the newest under /usr/lib/postgresql, where Debian keeps them off
// PATH.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(found) == 0 {
		return "", errors.New(InstallHint)
	}
	slices.SortFunc(found, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		return va - vb
	})
	return filepath.Dir(found[len(found)-1]), nil
}

// Start initialises a cluster in a fresh temporary directory and starts a
// server on a free loopback port, waiting until it accepts connections.
// fsync is off: the tests are about concurrency, not durability.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, exited: make(chan struct{})}
	fail := func(err error) (*Server, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	setProcAttr(initdb, cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v: %s", err, lastLines(string(out), 5)))
	}
	port, err := redistest.FreePort()
	if err != nil {
		return fail(err)
	}
	s.Port = port
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	setProcAttr(s.cmd, cred)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return fail(err)
	}
	if err := s.cmd.Start(); err != nil {
		return fail(fmt.Errorf("postgres: %w", err))
	}
	ready := make(chan struct{})
	go s.readLog(stderr, ready)
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	select {
	case <-ready:
	case <-s.exited:
		return fail(fmt.Errorf("postgres exited at start: %s", s.Log()))
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fail(fmt.Errorf("postgres not ready after 60s: %s", s.Log()))
	}
	// The log says ready; the listener is up before it, so this is a
	// check, not a wait.
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, c.Close()
}

// StartT starts a server for a test and stops it at cleanup; it fails the
// test if the server cannot start.
func StartT(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("stopping postgres: %v", err)
		}
	})
	return s
}

// readLog keeps the server's last log lines and closes ready when it says
// it accepts connections.
func (s *Server) readLog(r io.Reader, ready chan<- struct{}) {
	sc := bufio.NewScanner(r)
	said := false
	for sc.Scan() {
		line := sc.Text()
		s.mu.Lock()
		s.log = append(s.log, line)
		if len(s.log) > 50 {
			s.log = s.log[1:]
		}
		s.mu.Unlock()
		if !said && strings.Contains(line, "ready to accept connections") {
			said = true
			close(ready)
		}
	}
}

// Log returns the server's last log lines.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

// Close stops the server (an immediate shutdown: its data is thrown away)
// and removes its directory.
func (s *Server) Close() error {
	var err error
	select {
	case <-s.exited:
	default:
		if serr := s.cmd.Process.Signal(syscall.SIGQUIT); serr != nil {
			err = serr
		}
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			err = errors.Join(err, s.cmd.Process.Kill())
			<-s.exited
		}
	}
	return errors.Join(err, os.RemoveAll(s.Dir))
}

// credential returns the postgres user's when running as root (initdb
// and postgres refuse root), nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses root: no postgres user to run it as (%v)", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
