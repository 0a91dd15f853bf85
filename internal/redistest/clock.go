package redistest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// clockShimSource is an LD_PRELOAD library that makes a process's wall
// clock jump or run fast, set at run time through a Clock's file or once
// through the environment (see the file's comment for why not
// libfaketime). The library's tests, the chaos suite and the deployment
// checker's tests all use this one.
//
//go:embed clockshim/clockshim.c
var clockShimSource []byte

var shim struct {
	once sync.Once
	path string
	err  error
}

// ClockShim returns the path of the clock shim, compiling it with the C
// compiler (cc, or $CC) once per process into a directory of the system's
// temporary directory named by the source's hash, so later runs reuse it.
// It fails with a clear error when no compiler is found.
func ClockShim() (string, error) {
	shim.once.Do(func() {
		sum := sha256.Sum256(clockShimSource)
		dir := filepath.Join(os.TempDir(), "redistest-clockshim-"+hex.EncodeToString(sum[:8]))
		shim.path = filepath.Join(dir, "clockshim.so")
		if _, err := os.Stat(shim.path); err == nil {
			return
		}
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		if _, err := exec.LookPath(cc); err != nil {
			shim.err = fmt.Errorf("a server with a moved clock needs a C compiler to build its clock shim: %s not found (install gcc)", cc)
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			shim.err = err
			return
		}
		src := filepath.Join(dir, "clockshim.c")
		if err := os.WriteFile(src, clockShimSource, 0o644); err != nil {
			shim.err = err
			return
		}
		// Built under a name of this process's and renamed, so that another
		// test process never loads a half-written library.
		tmp := fmt.Sprintf("%s.%d.tmp", shim.path, os.Getpid())
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", tmp, src).CombinedOutput(); err != nil {
			shim.err = fmt.Errorf("building the clock shim: %v: %s", err, out)
			return
		}
		shim.err = os.Rename(tmp, shim.path)
	})
	return shim.path, shim.err
}

// ClockRateEnv returns the environment (for Options.Env) that makes a
// server's wall clock, the one TIME reports and keys expire by, run at rate
// times real speed from now on: 1.5 gains half a second every second. It
// builds the clock shim the first time, and fails when there is no C
// compiler or rate is not a positive finite number.
func ClockRateEnv(rate float64) ([]string, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("clock rate %v: must be a positive number", rate)
	}
	lib, err := ClockShim()
	if err != nil {
		return nil, err
	}
	return []string{
		"LD_PRELOAD=" + lib,
		"REDISTEST_CLOCK_RATE=" + strconv.FormatFloat(rate, 'f', -1, 64),
		"REDISTEST_CLOCK_ANCHOR=" + strconv.FormatInt(time.Now().UnixNano(), 10),
	}, nil
}

// Clock is a server's wall clock as the clock shim shows it, moved at run
// time: it can jump and run fast. Its methods are safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	f      *os.File
	seq    uint64
	anchor int64 // Unix ns
	offset int64 // ns
	rate   float64
}

// NewClock creates the control file at path, reading real time. Env gives
// the environment (for Options.Env) of a server whose wall clock it moves.
func NewClock(path string) (*Clock, error) {
	if _, err := ClockShim(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	c := &Clock{f: f, rate: 1}
	if err := c.write(); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return c, nil
}

// Env is the environment of a server whose wall clock c moves.
func (c *Clock) Env() []string {
	lib, _ := ClockShim() // built by NewClock
	return []string{"LD_PRELOAD=" + lib, "CLOCKSHIM_FILE=" + c.f.Name()}
}

// Set moves the clock by jump at once and lets it run at rate (1 is real
// speed) from now on, without any other jump. A rate at or below zero, or
// not finite, is an error.
func (c *Clock) Set(jump time.Duration, rate float64) error {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("clock rate %v: must be a positive number", rate)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	fake := c.anchor + int64(float64(now-c.anchor)*c.rate) + c.offset
	c.anchor, c.offset, c.rate = now, fake-now+int64(jump), rate
	return c.write()
}

// Reset sets the clock back to real time.
func (c *Clock) Reset() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.anchor, c.offset, c.rate = 0, 0, 1
	return c.write()
}

// Close closes the control file; the server keeps its last setting.
func (c *Clock) Close() error { return c.f.Close() }

// write publishes the setting under a sequence number that is odd while
// it changes, so the shim never reads half of it.
func (c *Clock) write() error {
	var b [32]byte
	c.seq++
	binary.LittleEndian.PutUint64(b[:8], c.seq)
	_, err := c.f.WriteAt(b[:8], 0)
	binary.LittleEndian.PutUint64(b[8:16], uint64(c.anchor))
	binary.LittleEndian.PutUint64(b[16:24], uint64(c.offset))
	binary.LittleEndian.PutUint64(b[24:32], math.Float64bits(c.rate))
	c.seq++
	binary.LittleEndian.PutUint64(b[:8], c.seq)
	_, werr := c.f.WriteAt(b[8:], 8)
	_, serr := c.f.WriteAt(b[:8], 0)
	return errors.Join(err, werr, serr)
}
