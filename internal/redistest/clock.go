package redistest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// clockRateSource is an LD_PRELOAD library that makes a process's wall
// clock run at a fixed rate (see the file's comment for why not libfaketime).
//
//go:embed clockrate/clockrate.c
var clockRateSource []byte

var clockRateLib struct {
	once sync.Once
	path string
	err  error
}

// buildClockRate compiles the clock library with the C compiler (cc, or
// $CC) once per process, into a directory of the system's temporary
// directory named by the source's hash, so later runs reuse it.
func buildClockRate() (string, error) {
	lib := &clockRateLib
	lib.once.Do(func() {
		sum := sha256.Sum256(clockRateSource)
		dir := filepath.Join(os.TempDir(), "redistest-clockrate-"+hex.EncodeToString(sum[:8]))
		lib.path = filepath.Join(dir, "clockrate.so")
		if _, err := os.Stat(lib.path); err == nil {
			return
		}
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "cc"
		}
		if _, err := exec.LookPath(cc); err != nil {
			lib.err = fmt.Errorf("a server with a fast clock needs a C compiler for its clock library: %s not found (install gcc)", cc)
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			lib.err = err
			return
		}
		src := filepath.Join(dir, "clockrate.c")
		if err := os.WriteFile(src, clockRateSource, 0o644); err != nil {
			lib.err = err
			return
		}
		// Built under a name of this process's and renamed, so that another
		// test process never loads a half-written library.
		tmp := fmt.Sprintf("%s.%d.tmp", lib.path, os.Getpid())
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", tmp, src).CombinedOutput(); err != nil {
			lib.err = fmt.Errorf("building the clock library: %v: %s", err, out)
			return
		}
		lib.err = os.Rename(tmp, lib.path)
	})
	return lib.path, lib.err
}

// ClockRateEnv returns the environment (for Options.Env) that makes a
// server's wall clock, the one TIME reports and keys expire by, run at rate
// times real speed from now on: 1.5 gains half a second every second. It
// builds a small LD_PRELOAD library with the C compiler the first time, and
// fails when there is none or rate is not a positive finite number.
func ClockRateEnv(rate float64) ([]string, error) {
	if !(rate > 0) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("clock rate %v: must be a positive number", rate)
	}
	lib, err := buildClockRate()
	if err != nil {
		return nil, err
	}
	return []string{
		"LD_PRELOAD=" + lib,
		"REDISTEST_CLOCK_RATE=" + strconv.FormatFloat(rate, 'f', -1, 64),
		"REDISTEST_CLOCK_ANCHOR=" + strconv.FormatInt(time.Now().UnixNano(), 10),
	}, nil
}
