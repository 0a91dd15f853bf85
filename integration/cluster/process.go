package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/quorumlock/redlock/internal/redistest"
)

// Processes is the default backend: redis-server processes on loopback
// ports, from internal/redistest. Kill is SIGKILL, Pause is SIGSTOP. It
// supports every option: the clock shim, replicas, and the data directory
// the restart-everysec fault truncates.
type Processes struct{}

// Name returns "processes".
func (Processes) Name() string { return "processes" }

// Start starts a redis-server process on a free loopback port, in a data
// directory of its own that Close removes. The directory is in memory
// (/dev/shm) when the machine has it: an fsync there costs nothing, while
// on a disk shared with other work every write of a persistent server
// (appendfsync always) waits for it. The faults need nothing more of the
// disk: a killed process loses nothing of what it wrote either way, and a
// machine crash (restart-everysec) is played by cutting the file.
func (Processes) Start(_ context.Context, opts Options) (Server, error) {
	dir, err := dataDir()
	if err != nil {
		return nil, err
	}
	p := &process{dir: dir}
	ro := redistest.Options{Persistent: opts.Persistent, Dir: dir, Args: opts.serverArgs()}
	if opts.Clock {
		if p.clock, err = redistest.NewClock(filepath.Join(dir, "clock.ctl")); err != nil {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
		ro.Env = p.clock.Env()
	}
	if p.s, err = redistest.Start(ro); err != nil {
		return nil, errors.Join(err, p.removeDir())
	}
	return p, nil
}

type process struct {
	s     *redistest.Server
	dir   string
	clock *redistest.Clock // nil unless Options.Clock
}

func (p *process) Addr() string                 { return p.s.Addr }
func (p *process) Kill(context.Context) error   { return p.s.Kill() }
func (p *process) Start(context.Context) error  { return p.s.Restart() }
func (p *process) Pause(context.Context) error  { return p.s.Pause() }
func (p *process) Resume(context.Context) error { return p.s.Resume() }
func (p *process) Close(context.Context) error  { return errors.Join(p.s.Close(), p.removeDir()) }

// Dir returns the server's data directory.
func (p *process) Dir() string { return p.dir }

// Clock returns the server's wall clock, nil unless started with
// Options.Clock.
func (p *process) Clock() *redistest.Clock { return p.clock }

func (p *process) removeDir() error {
	var err error
	if p.clock != nil {
		err = p.clock.Close()
	}
	return errors.Join(err, os.RemoveAll(p.dir))
}

// dataDir makes a server's data directory: in /dev/shm when the machine has
// one this process may write in, else in the default temporary directory.
func dataDir() (string, error) {
	if dir, err := os.MkdirTemp("/dev/shm", "redis-chaos-"); err == nil {
		return dir, nil
	}
	return os.MkdirTemp("", "redis-chaos-")
}
