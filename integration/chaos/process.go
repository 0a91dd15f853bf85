package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/integration/checker"
)

// clientEnv is the environment variable that turns a test binary into a
// chaos client process; it carries the client's spec as JSON.
const clientEnv = "REDLOCK_CHAOS_CLIENT"

// ServeClientProcess runs a chaos client process and exits, when this
// process was started as one (by a Workload with Config.Processes);
// otherwise it returns at once. A test binary whose scenarios use client
// processes calls it first thing in TestMain: the Workload starts client
// processes by running its own executable again.
//
// A client process is the whole client stopped at once by SIGSTOP, wherever
// it is: in Obtain between the majority and the return, in Extend, between
// a check of Valid and a write. Its records reach the parent over stdout,
// one JSON object per line, with wall-clock times (processes share no
// monotonic clock).
func ServeClientProcess() {
	spec := os.Getenv(clientEnv)
	if spec == "" {
		return
	}
	if err := serveClient(spec); err != nil {
		fmt.Fprintln(os.Stderr, "chaos client:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// clientSpec is what a client process needs to know.
type clientSpec struct {
	Client int
	Addrs  []string
	Config Config
	Seed   [2]uint64
	// Store is the effects store's address (a PostgreSQL URL when
	// Config.Resource says so), "" without one.
	Store string
	// CPUProfile, if set, is where the process writes its CPU profile.
	CPUProfile string `json:",omitempty"`
}

// event is one line from a client process.
type event struct {
	T       string // "hold", "fail" or "write"
	Key     string `json:",omitempty"`
	Token   string `json:",omitempty"`
	Fence   uint64 `json:",omitempty"`
	Hidden  bool   `json:",omitempty"` // the fence is hidden (Do)
	Segment int    `json:",omitempty"`
	Shared  bool   `json:",omitempty"` // a reader's hold
	Slots   int    `json:",omitempty"` // a semaphore's permit
	Start   int64  `json:",omitempty"` // Unix ns
	End     int64  `json:",omitempty"`
	Op      string `json:",omitempty"`
	Kind    string `json:",omitempty"`
	Detail  string `json:",omitempty"`
}

func serveClient(specJSON string) error {
	var spec clientSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The parent closes our stdin to stop us (or dies, which closes it too).
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return errors.Join(err, f.Close())
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close() // a profile cut short only loses its tail
		}()
	}
	out := &pipeRecorder{enc: json.NewEncoder(os.Stdout)}
	w := &Workload{addrs: spec.Addrs, cfg: &spec.Config, keys: keys(spec.Config.Keys), rec: out, seed: spec.Seed}
	if spec.Config.Fencing {
		w.write = out.write
	}
	if spec.Store != "" {
		fx, err := openEffects(&spec.Config, spec.Store)
		if err != nil {
			return err
		}
		w.fx = fx
		defer fx.Close()
	}
	return errors.Join(w.client(ctx, spec.Client), out.err)
}

// pipeRecorder sends a client process's records to its parent.
type pipeRecorder struct {
	mu  sync.Mutex
	enc *json.Encoder
	err error
}

func (r *pipeRecorder) send(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.enc.Encode(e); err != nil && r.err == nil {
		r.err = err
	}
}

func (r *pipeRecorder) AddHold(h checker.Hold) {
	r.send(event{T: "hold", Key: h.Key, Token: h.Token, Fence: h.Fence, Hidden: h.FenceHidden, Segment: h.Segment,
		Shared: h.Shared, Slots: h.Slots, Start: h.Start.UnixNano(), End: h.End.UnixNano()})
}

func (r *pipeRecorder) AddFailure(op string, err error, at time.Time) {
	r.send(event{T: "fail", Op: op, Kind: string(checker.Classify(err)), Start: at.UnixNano()})
}

func (r *pipeRecorder) AddAnomaly(a checker.Anomaly) {
	r.send(event{T: "anomaly", Kind: a.Kind, Key: a.Key, Detail: a.Detail, Start: a.At.UnixNano()})
}

// write asks the parent to write to its fenced resource; the write happens
// when the parent reads the line, as a request reaches a remote service.
func (r *pipeRecorder) write(_ int, key, token string, fence uint64) {
	r.send(event{T: "write", Key: key, Token: token, Fence: fence})
}

// clientProcess is a client process as its parent sees it.
type clientProcess struct {
	id     int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *lockedBuffer
}

// startProcess starts client process id, running this executable again.
func (w *Workload) startProcess(id int) (*clientProcess, error) {
	cs := clientSpec{Client: id, Addrs: w.clientAddrs(id), Config: *w.cfg, Seed: w.seed, Store: w.storeAddr}
	if w.cfg.ProfileDir != "" {
		cs.CPUProfile = filepath.Join(w.cfg.ProfileDir, fmt.Sprintf("client%d-%d.prof", id, os.Getpid()))
	}
	spec, err := json.Marshal(cs)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// -test.run=^$ keeps a test binary that was not set up for client
	// processes from running tests in the child.
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), clientEnv+"="+string(spec))
	p := &clientProcess{id: id, cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// startProcesses starts the workload's client processes; on failure it
// stops those already started.
func (w *Workload) startProcesses() error {
	for k := range w.cfg.Processes {
		p, err := w.startProcess(w.cfg.Clients + k)
		if err != nil {
			for _, p := range w.procs {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
			w.procs = nil
			return fmt.Errorf("starting client process: %w", err)
		}
		w.procs = append(w.procs, p)
	}
	return nil
}

// run reads the process's records until ctx ends, then stops it and waits
// for it to release what it holds and exit.
func (p *clientProcess) run(ctx context.Context, h *checker.History, res *checker.Resource) error {
	stop := context.AfterFunc(ctx, func() {
		// Closing stdin is the stop signal; a stopped process could not
		// read it.
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.stdin.Close()
	})
	defer stop()
	sc := bufio.NewScanner(p.stdout)
	var bad error
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			bad = fmt.Errorf("client process %d: bad line %q: %w", p.id, sc.Text(), err)
			continue
		}
		switch e.T {
		case "hold":
			h.AddHold(checker.Hold{Client: p.id, Key: e.Key, Token: e.Token, Fence: e.Fence, FenceHidden: e.Hidden, Segment: e.Segment,
				Shared: e.Shared, Slots: e.Slots, Start: time.Unix(0, e.Start), End: time.Unix(0, e.End)})
		case "fail":
			h.AddFailureKind(e.Op, checker.Kind(e.Kind), time.Unix(0, e.Start))
		case "anomaly":
			h.AddAnomaly(checker.Anomaly{Kind: e.Kind, Client: p.id, Key: e.Key, Detail: e.Detail, At: time.Unix(0, e.Start)})
		case "write":
			if res != nil {
				res.Write(p.id, e.Key, e.Token, e.Fence)
			}
		}
	}
	err := errors.Join(bad, sc.Err())
	if werr := p.cmd.Wait(); werr != nil {
		err = errors.Join(err, fmt.Errorf("client process %d: %w\n%s", p.id, werr, p.stderr.String()))
	}
	return err
}

// Stop freezes the process with SIGSTOP, the whole client at once; Continue
// lets it go on.
func (p *clientProcess) Stop() error     { return p.cmd.Process.Signal(syscall.SIGSTOP) }
func (p *clientProcess) Continue() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// lockedBuffer keeps the last few kilobytes a client process wrote to
// stderr, for error messages.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 8<<10 {
		b.buf = b.buf[len(b.buf)-8<<10:]
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
