package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// envFence names the variable that passes the fencing token to the command.
const envFence = "REDLOCK_FENCE"

// Defaults of run's flags.
const (
	defaultTTL   = 30 * time.Second
	defaultGrace = 10 * time.Second
)

var _ = register(&command{
	name:     "run",
	synopsis: "[flags] KEY -- COMMAND [ARGS...]",
	help: `Obtain the lock KEY on a majority of the nodes, run COMMAND, keep the lock
extended while it runs (every third of --ttl), and release it when COMMAND
ends: flock(1) across machines. By default (-n) redlock tries once and exits
with 75 (-E) when another owner holds the lock, naming the holder's
metadata; -w waits up to a duration ("-w 10" is ten seconds) or forever.
With --shared (-s) it takes a reader's share of KEY, as flock -s: readers
run side by side, and a plain run of KEY (the writer) runs alone, ahead of
readers that come after it; with --slots N, one of N permits of the
semaphore KEY: at most N such commands run at once.
When a majority of nodes cannot be reached it exits with 69
(--outage-exit-code) and says why, also when --wait ran out during the
outage, and also with --quiet: an outage is never silent.

COMMAND runs in its own process group with redlock's standard input, output,
error and environment, less REDLOCK_NODES (unless --pass-nodes). When
standard input is the terminal redlock runs in the foreground of, COMMAND's
group gets the terminal while it runs: it can read from it, and Ctrl-C or
Ctrl-\ reach it directly; Ctrl-Z does not suspend it (it is resumed at
once: a suspended command would keep the lock from everyone). Signals sent
to redlock (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) are forwarded
to the group, and the lock is released once every process of the group
has exited: a COMMAND that exits leaving processes in its group keeps the
lock until they end.

If the lock is lost while COMMAND runs (an extension finds another owner,
or no extension reaches a majority of nodes in time), the group gets
SIGTERM at once, and SIGKILL --grace later, but always before the lock's
validity ends: the SIGTERM comes at the latest --node-timeout plus a
twentieth of --ttl (the warning lead) before it, and SIGKILL at the latest
half the lead before it, whatever --grace says (--unsafe-grace lifts that
bound). SIGTERM thus gets at most half the lead: 1s with the defaults.
redlock exits with 76. While redlock itself cannot run (stopped with
SIGSTOP, starved), a watchdog process kills the group with SIGKILL a
quarter of the lead before the validity it last extended ends; if redlock
dies, the watchdog kills the group at once. A process that leaves the group
(setsid, a daemon) is not covered. --ttl must leave room for an extension
before the warning: more than twice --node-timeout, plus a twentieth of
itself and the clock drift.

Durations are Go durations (1m30s, 500ms) or bare seconds (90, 0.5).

Environment:
  REDLOCK_NODES  the default of --nodes; not passed to COMMAND
  REDLOCK_FENCE  set for COMMAND with --fencing: the lock's fencing token
`,
	summary: `Run COMMAND while holding the lock KEY on a majority of the nodes: flock(1)
across machines. The lock is extended while COMMAND runs and released once
its process group has ended; if it is lost, the group gets SIGTERM, then
SIGKILL before the lock's validity ends. redlock tries once (-n) and exits 75
when another owner holds the lock; -w waits. --shared takes a reader's share,
--slots N one of N permits; --fencing puts a token in $REDLOCK_FENCE.
`,
	exits: []exitDoc{
		{"COMMAND's own", "when it ran; 128+N when signal N ended it"},
		exitDocUsage,
		{"65", "the semaphore KEY has another number of permits than --slots"},
		exitDocNoInput,
		{"69", "a majority of nodes could not be reached (--outage-exit-code)"},
		exitDocFailure,
		{"75", "the lock is busy, held by another owner (-E)"},
		{"76", "the lock was lost while COMMAND ran"},
		exitDocConfig,
		{"126, 127", "COMMAND could not be started, or was not found"},
		{"128+N", "signal N arrived while waiting for the lock"},
	},
	define: defineRun,
})

type runFlags struct {
	lockFlags
	grace       time.Duration
	unsafeGrace bool
	passNodes   bool
}

func defineRun(fs *flagSet) action {
	f := &runFlags{}
	f.lockFlags.register(fs, "COMMAND ends")
	fs.BoolVar(&f.fencing, "fencing", false, "get a fencing token, passed to COMMAND in $"+envFence)
	fs.BoolVar(&f.shared, "shared", false, "take a reader's share of KEY, as flock -s: readers run side by side,\n"+
		"and a plain run of KEY (its writer) runs alone")
	fs.alias("s", "shared")
	fs.IntVar(&f.slots, "slots", 0, "take one of N permits of the semaphore KEY: at most N run at once")
	registerGrace(fs, &f.grace, &f.unsafeGrace, "a lost lock")
	fs.BoolVar(&f.passNodes, "pass-nodes", false, "leave $"+envNodes+" in COMMAND's environment (it is removed:\nit may hold passwords)")
	return func(a *app, fs *flagSet, args []string) int { return a.run(fs, f, args) }
}

// registerGrace defines --grace and --unsafe-grace, as run and elect take
// them; after says after what the command is stopped ("a lost lock").
func registerGrace(fs *flagSet, grace *time.Duration, unsafeGrace *bool, after string) {
	fs.durationVar(grace, "grace", defaultGrace, "after "+after+", the most time between SIGTERM and SIGKILL;\n"+
		"whatever it says, SIGKILL comes by half of --node-timeout plus\n"+
		"a twentieth of --ttl before the validity ends (unless --unsafe-grace)")
	fs.BoolVar(unsafeGrace, "unsafe-grace", false, "let --grace run past the validity's end: COMMAND may then still\n"+
		"run while another holder runs its own")
}

// parseCommandLine parses "[flags] NOUN -- COMMAND [ARGS...]", as run and
// elect take it: the flags, one non-empty NOUN (KEY or NAME), and a
// COMMAND. It splits at the first "--" itself: flag would take it as the end
// of the flags, and a missing NOUN would go unnoticed. When ok is false,
// code is the exit status of the usage error it reported.
func (a *app) parseCommandLine(fs *flagSet, args []string, noun string) (pos, argv []string, code int, ok bool) {
	sep := slices.Index(args, "--")
	before := args
	if sep >= 0 {
		before, argv = args[:sep], args[sep+1:]
	}
	pos, code, ok = fs.parse(a, before)
	if !ok {
		return nil, nil, code, false
	}
	var problem string
	switch {
	case sep < 0 && len(pos) > 1:
		problem = fmt.Sprintf("missing \"--\" between %s and COMMAND (%s %q, then %q)", noun, noun, pos[0], pos[1])
	case sep < 0:
		problem = fmt.Sprintf("missing \"-- COMMAND\" after %s", noun)
	case len(pos) == 0:
		problem = fmt.Sprintf("missing %s before \"--\"", noun)
	case len(pos) > 1:
		problem = fmt.Sprintf("one %s before \"--\", got %d arguments (%s)", noun, len(pos), strings.Join(quoteAll(pos), " "))
	case pos[0] == "":
		problem = "empty " + noun
	case len(argv) == 0:
		problem = "missing COMMAND after \"--\""
	default:
		return pos, argv, 0, true
	}
	return nil, nil, a.usageError(fs.cmd, problem), false
}

func (a *app) run(fs *flagSet, f *runFlags, args []string) int {
	pos, argv, code, ok := a.parseCommandLine(fs, args, "KEY")
	if !ok {
		return code
	}
	switch {
	case f.grace < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--grace %v must not be negative", f.grace))
	}
	if code, ok := f.lockFlags.check(a, fs); !ok {
		return code
	}
	key := pos[0]
	// A command that cannot run is found before the lock is taken: no
	// point in holding it, or in making others wait.
	if _, err := exec.LookPath(argv[0]); err != nil {
		return a.cannotRun(fs.cmd, argv[0], err)
	}
	return a.withLock(fs, &f.lockFlags, key, func(lock *redlock.Lock, sigs <-chan os.Signal) int {
		return a.supervise(fs.cmd, lock, argv, f, sigs)
	})
}

// supervise runs the command while keeping the lock, and releases the lock
// when the command has exited. It returns the exit code.
func (a *app) supervise(c *command, lock *redlock.Lock, argv []string, f *runFlags, sigs <-chan os.Signal) int {
	// Keep the lock alive first: KeepAlive refuses a --ttl too short to
	// extend in time, and the command must not start then, nor when the
	// lock is lost already: it could not be stopped in time.
	held, stopKeepAlive, exit, ok := a.keepAlive(c, lock, f.verbose, "before the command started")
	if !ok {
		return exit
	}
	defer stopKeepAlive()

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.Env = commandEnv(a.environ(), lock.Fence(), f.passNodes)
	tty := a.terminal()
	setProcessGroup(cmd, tty)
	end, err := a.superviseCommand(&guarded{
		c:     c,
		what:  fmt.Sprintf("lock %q", lock.Key()),
		held:  held,
		until: lock.Until,
		p:     newKillPolicy(f.ttl, f.nodeTimeout, f.grace, f.unsafeGrace),
		cmd:   cmd,
		tty:   tty,
	}, sigs)
	stopKeepAlive()
	switch {
	case err != nil:
		a.release(c, lock, 0, f.verbose)
		return a.startFailed(c, argv[0], err)
	case end.lost != nil:
		a.dropLost(c, lock, f.verbose)
		return exitLost
	case end.failed:
		a.release(c, lock, 0, f.verbose)
		return exitFailure
	}
	a.release(c, lock, f.cooldown, f.verbose)
	return end.code
}

// terminal returns redlock's terminal when the command is to get its
// foreground: standard input is the terminal, and redlock's process group
// is in its foreground. The command's standard output and error must be
// files too, so that it is passed them as they are.
func (a *app) terminal() *terminal {
	_, outFile := a.stdout.(*os.File)
	_, errFile := a.stderr.(*os.File)
	if !outFile || !errFile {
		return nil
	}
	return foregroundTerminal(a.stdin)
}

// takeBack gets the terminal back from the command, if it had it.
func (a *app) takeBack(c *command, cmd *exec.Cmd, tty *terminal) {
	if err := tty.takeBack(cmd); err != nil {
		a.errorf(c, "taking the terminal back from the command: %v", err)
	}
}

// waitCommand waits for the command to exit and returns its exit code
// (128+N when signal N ended it).
func waitCommand(cmd *exec.Cmd) (int, error) {
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return exitFailure, err
	}
	return commandExitCode(cmd.ProcessState), nil
}

// cannotRun reports a command that could not be started: 127 when it was
// not found, 126 otherwise, as shells do.
func (a *app) cannotRun(c *command, name string, err error) int {
	a.errorf(c, "cannot run %q: %v", name, err)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return exitNotFound
	}
	return exitCannotRun
}

// lossReason says why KeepAlive found the lock lost.
func lossReason(err error) string {
	var qe *redlock.QuorumError
	switch {
	case errors.As(err, &qe):
		// The extension round that found it, node by node.
		return errMsg(qe)
	case errors.Is(err, redlock.ErrLockExpired):
		return "no extension reached a majority of nodes in time (its validity ends within --node-timeout and a margin)"
	}
	return errMsg(err)
}

// commandEnv is the command's environment: redlock's, with REDLOCK_FENCE set
// to the fencing token, or removed when there is none (it may be a token of
// an outer redlock); and without REDLOCK_NODES, which may hold passwords,
// unless passNodes.
func commandEnv(env []string, fence uint64, passNodes bool) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, envFence+"=") || !passNodes && strings.HasPrefix(kv, envNodes+"=")
	})
	if fence != 0 {
		env = append(env, envFence+"="+strconv.FormatUint(fence, 10))
	}
	return env
}

func defaultMetadata() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("host=%s pid=%d", host, os.Getpid())
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}
