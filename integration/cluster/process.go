package cluster

import (
	"context"

	"github.com/quorumlock/redlock/internal/redistest"
)

// Processes is the default backend: redis-server processes on loopback
// ports, from internal/redistest. Kill is SIGKILL, Pause is SIGSTOP.
type Processes struct{}

// Name returns "processes".
func (Processes) Name() string { return "processes" }

// Start starts a redis-server process on a free loopback port.
func (Processes) Start(_ context.Context, opts Options) (Server, error) {
	s, err := redistest.Start(redistest.Options{Persistent: opts.Persistent})
	if err != nil {
		return nil, err
	}
	return process{s}, nil
}

type process struct{ s *redistest.Server }

func (p process) Addr() string                 { return p.s.Addr }
func (p process) Kill(context.Context) error   { return p.s.Kill() }
func (p process) Start(context.Context) error  { return p.s.Restart() }
func (p process) Pause(context.Context) error  { return p.s.Pause() }
func (p process) Resume(context.Context) error { return p.s.Resume() }
func (p process) Close(context.Context) error  { return p.s.Close() }
