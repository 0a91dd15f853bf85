package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
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
ends. With --wait 0 (the default) redlock tries once and exits with 75 when
another owner holds the lock. When a majority of nodes cannot be reached it
exits with 69 and says why, also when --wait ran out during the outage, and
also with --quiet: an outage is never silent.

COMMAND runs in its own process group with redlock's standard input, output,
error and environment. Signals sent to redlock (SIGINT, SIGTERM, SIGHUP,
SIGQUIT, SIGUSR1, SIGUSR2) are forwarded to that group, and the lock is
released once COMMAND has exited. If the lock is lost while COMMAND runs (an
extension finds another owner, or no extension reaches a majority of nodes in
time), the group gets SIGTERM at once, and SIGKILL --grace later; redlock
exits with 76. Without an extension the SIGTERM comes at the latest
--node-timeout plus a twentieth of --ttl before the lock's validity ends, so
that COMMAND can stop while nobody else can hold the lock yet. --ttl must
leave room for an extension before then: more than twice --node-timeout,
plus a twentieth of itself and the clock drift.

Exit codes:
  COMMAND's own  when it ran; 128+N when signal N ended it
  64             usage error
  69             a majority of nodes could not be reached
  70             other failure of redlock
  75             the lock is busy (held by another owner)
  76             the lock was lost while COMMAND ran
  126, 127       COMMAND could not be started, or was not found

Environment:
  REDLOCK_NODES  the default of --nodes
  REDLOCK_FENCE  set for COMMAND with --fencing: the lock's fencing token
`,
	define: defineRun,
})

type runFlags struct {
	nodeFlags
	ttl          time.Duration
	wait         time.Duration
	cooldown     time.Duration
	grace        time.Duration
	metadata     string
	fencing      bool
	restartGuard time.Duration
	lockDelay    time.Duration
	quiet        bool
	verbose      bool
}

func defineRun(fs *flagSet) action {
	f := &runFlags{}
	f.register(fs)
	fs.DurationVar(&f.ttl, "ttl", defaultTTL, "the lock's TTL: how long it outlives a redlock that died;\nit is extended every third of it, and must exceed twice\n--node-timeout plus a twentieth of itself")
	fs.DurationVar(&f.wait, "wait", 0, "how long to wait for a busy lock; 0 tries once")
	fs.DurationVar(&f.cooldown, "cooldown", 0, "keep the lock this long after COMMAND ends, so that nobody\nruns it again sooner")
	fs.DurationVar(&f.grace, "grace", defaultGrace, "after a lost lock, the time between SIGTERM and SIGKILL\n(the SIGTERM comes before the lock's validity ends)")
	fs.StringVar(&f.metadata, "metadata", "", "a note stored with the lock, shown by inspect\n(default \"host=HOSTNAME pid=PID\")")
	fs.BoolVar(&f.fencing, "fencing", false, "get a fencing token, passed to COMMAND in $"+envFence)
	fs.DurationVar(&f.restartGuard, "restart-guard", 0, "keep a node that lost its memory (restart, reload, failover, eviction,\n"+
		"flush) from voting for this long: at least the largest --ttl plus\n"+
		"--lock-delay, and --cooldown, any client uses on these nodes; 0 turns\n"+
		"the guard off (see \"redlock bootstrap\")")
	fs.DurationVar(&f.lockDelay, "lock-delay", 0, "after a lock ends without a release (redlock was killed, or its host\n"+
		"paused past the lock's validity), keep the key from everyone for this\n"+
		"long after its TTL; a normal end releases at once; 0 turns it off")
	fs.BoolVar(&f.quiet, "quiet", false, "say nothing when the lock is busy (the exit code still does);\n"+
		"an outage (exit 69) and other failures are still reported")
	fs.BoolVar(&f.verbose, "verbose", false, "report waiting, obtaining and releasing the lock on standard error")
	return func(a *app, fs *flagSet, args []string) int { return a.run(fs, f, args) }
}

func (a *app) run(fs *flagSet, f *runFlags, args []string) int {
	// Split at the first "--" ourselves: flag would take it as the end of
	// the flags and a missing KEY would go unnoticed.
	sep := slices.Index(args, "--")
	before, argv := args, []string(nil)
	if sep >= 0 {
		before, argv = args[:sep], args[sep+1:]
	}
	pos, code, ok := fs.parse(a, before)
	if !ok {
		return code
	}
	switch {
	case sep < 0 && len(pos) > 1:
		return a.usageError(fs.cmd, fmt.Sprintf("missing \"--\" between KEY and COMMAND (KEY %q, then %q)", pos[0], pos[1]))
	case sep < 0:
		return a.usageError(fs.cmd, "missing \"-- COMMAND\" after KEY")
	case len(pos) == 0:
		return a.usageError(fs.cmd, "missing KEY before \"--\"")
	case len(pos) > 1:
		return a.usageError(fs.cmd, fmt.Sprintf("one KEY before \"--\", got %d arguments (%s)", len(pos), strings.Join(quoteAll(pos), " ")))
	case pos[0] == "":
		return a.usageError(fs.cmd, "empty KEY")
	case len(argv) == 0:
		return a.usageError(fs.cmd, "missing COMMAND after \"--\"")
	case f.wait < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--wait %v must not be negative", f.wait))
	case f.cooldown < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--cooldown %v must not be negative", f.cooldown))
	case f.grace < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--grace %v must not be negative", f.grace))
	case f.restartGuard < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--restart-guard %v must not be negative", f.restartGuard))
	case f.lockDelay < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--lock-delay %v must not be negative", f.lockDelay))
	case f.restartGuard > 0 && f.cooldown > f.restartGuard:
		// Checked before the command runs: the library would refuse the
		// cooldown only at the end, after the work is done.
		return a.usageError(fs.cmd, fmt.Sprintf("--cooldown %v is above --restart-guard %v: a node that lost its memory would vote again before the cooldown ends", f.cooldown, f.restartGuard))
	}
	key := pos[0]
	// A command that cannot run is found before the lock is taken: no
	// point in holding it, or in making others wait.
	if _, err := exec.LookPath(argv[0]); err != nil {
		return a.cannotRun(fs.cmd, argv[0], err)
	}
	if !fs.isSet("metadata") {
		f.metadata = defaultMetadata()
	}

	opts := []redlock.Option{redlock.WithTTL(f.ttl), redlock.WithMetadata(f.metadata)}
	if f.fencing {
		opts = append(opts, redlock.WithFencing())
	}
	if f.restartGuard > 0 {
		opts = append(opts, redlock.WithRestartGuard(f.restartGuard))
	}
	if f.lockDelay > 0 {
		opts = append(opts, redlock.WithLockDelay(f.lockDelay))
	}
	// ctx ends the wait for the lock when a signal arrives. It is
	// cancelled only after the Locker has closed: the nodes still answering
	// when a call returns (it returns once a majority has) must not be cut
	// off, or the lock would end up on fewer nodes than granted it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waitCtx := ctx
	if f.wait > 0 {
		var cancelWait context.CancelFunc
		waitCtx, cancelWait = context.WithTimeout(ctx, f.wait)
		defer cancelWait()
	}

	l, closeAll, code, ok := a.locker(fs, &f.nodeFlags, opts...)
	if !ok {
		return code
	}
	defer closeAll()

	// Listen before obtaining: a signal while waiting for the lock ends the
	// wait instead of killing redlock.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	lock, code := a.obtain(waitCtx, cancel, fs.cmd, l, key, f, sigs)
	if lock == nil {
		return code
	}
	return a.supervise(fs.cmd, lock, argv, f, sigs)
}

// obtain gets the lock, waiting until ctx ends (--wait), or until a signal
// arrives; then it calls cancel. It returns the lock, or nil and the exit
// code.
func (a *app) obtain(ctx context.Context, cancel context.CancelFunc, c *command, l *redlock.Locker, key string, f *runFlags, sigs <-chan os.Signal) (*redlock.Lock, int) {
	type result struct {
		lock *redlock.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		lock, err := a.tryThenWait(ctx, c, l, key, f)
		done <- result{lock, err}
	}()
	var sig os.Signal
	for {
		select {
		case s := <-sigs:
			if sig == nil {
				sig = s
				cancel()
			}
		case r := <-done:
			switch {
			case sig != nil:
				if r.lock != nil {
					a.release(c, r.lock, 0, f.verbose)
				}
				a.errorf(c, "%v while waiting for %q: the command did not run", sig, key)
				return nil, signalExitCode(sig)
			case r.err == nil:
				if f.verbose {
					a.errorf(c, "obtained %q (fencing token %d, valid until %s)", key, r.lock.Fence(), r.lock.Until().Format(time.RFC3339Nano))
				}
				return r.lock, exitOK
			case errors.Is(r.err, redlock.ErrNotObtained) && f.quiet:
				return nil, exitBusy
			}
			return nil, a.fail(c, fmt.Sprintf("lock %q", key), r.err)
		}
	}
}

// tryThenWait tries once, and when the lock is busy or the nodes are out of
// reach and --wait allows, waits for it until ctx ends.
func (a *app) tryThenWait(ctx context.Context, c *command, l *redlock.Locker, key string, f *runFlags) (*redlock.Lock, error) {
	lock, err := l.TryObtain(ctx, key)
	if err == nil || f.wait == 0 || ctx.Err() != nil ||
		!errors.Is(err, redlock.ErrNotObtained) && !errors.Is(err, redlock.ErrNoQuorum) {
		return lock, err
	}
	if f.verbose {
		a.errorf(c, "waiting up to %v for %q: %s", f.wait, key, errMsg(err))
	}
	return l.Obtain(ctx, key)
}

// supervise runs the command while keeping the lock, and releases the lock
// when the command has exited. It returns the exit code.
func (a *app) supervise(c *command, lock *redlock.Lock, argv []string, f *runFlags, sigs <-chan os.Signal) int {
	// Keep the lock alive first: KeepAlive refuses a --ttl too short to
	// extend in time, and the command must not start then.
	held, stopKeepAlive := lock.KeepAlive(context.Background())
	defer stopKeepAlive()
	if err := context.Cause(held); err != nil {
		stopKeepAlive()
		if errors.Is(err, redlock.ErrInvalid) {
			a.release(c, lock, 0, f.verbose)
			return a.usageError(c, errMsg(err))
		}
		// Lost already (the acquisition left less validity than the
		// warning needs): do not start what could not be stopped in time.
		a.errorf(c, "lock %q lost before the command started: %s", lock.Key(), lossReason(err))
		_ = lock.Release(context.Background())
		return exitLost
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.Env = commandEnv(a.environ(), lock.Fence())
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		stopKeepAlive()
		a.release(c, lock, 0, f.verbose)
		return a.cannotRun(c, argv[0], err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		defer close(exited)
		waitErr = cmd.Wait()
	}()

	var (
		lost      error
		lostC     = held.Done()
		killTimer *time.Timer
		killC     <-chan time.Time
	)
wait:
	for {
		select {
		case <-exited:
			break wait
		case s := <-sigs:
			a.signal(c, cmd, s)
		case <-lostC:
			lostC = nil
			lost = context.Cause(held)
			a.errorf(c, "lock %q lost while the command ran: %s; sending SIGTERM", lock.Key(), lossReason(lost))
			a.signal(c, cmd, sigTerm)
			killTimer = time.NewTimer(f.grace)
			killC = killTimer.C
		case <-killC:
			killC = nil
			a.errorf(c, "command still running %v after SIGTERM; sending SIGKILL", f.grace)
			a.signal(c, cmd, sigKill)
		}
	}
	if killTimer != nil {
		killTimer.Stop()
	}
	stopKeepAlive()
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		a.errorf(c, "waiting for the command: %v", waitErr)
	}

	if lost != nil {
		// Our keys may survive on a minority of nodes (those that could
		// not be reached); remove them so that others need not wait for
		// them to expire. The lock is lost either way.
		if err := lock.Release(context.Background()); err != nil && f.verbose {
			a.errorf(c, "cleaning up the lost lock: %s", errMsg(err))
		}
		return exitLost
	}
	a.release(c, lock, f.cooldown, f.verbose)
	return commandExitCode(cmd.ProcessState)
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

// release gives up the lock, keeping its key for cooldown. A failure is
// reported but does not change the exit code: the keys expire by their TTL.
func (a *app) release(c *command, lock *redlock.Lock, cooldown time.Duration, verbose bool) {
	// No deadline of our own: every node call is bounded by --node-timeout,
	// and cancelling the context when ReleaseAfter returns would cut off
	// the nodes that had not answered yet (it returns at a majority), and
	// leave our key there until its TTL.
	err := lock.ReleaseAfter(context.Background(), cooldown)
	switch {
	case err != nil:
		a.errorf(c, "warning: releasing %q: %s (its keys expire by their TTL)", lock.Key(), errMsg(err))
	case verbose && cooldown > 0:
		a.errorf(c, "released %q after a cooldown of %v", lock.Key(), cooldown)
	case verbose:
		a.errorf(c, "released %q", lock.Key())
	}
}

// signal sends sig to the command's process group. A command that has
// exited already is no error.
func (a *app) signal(c *command, cmd *exec.Cmd, sig os.Signal) {
	if err := signalGroup(cmd.Process, sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		a.errorf(c, "sending %v to the command: %v", sig, err)
	}
}

// commandEnv is the command's environment: redlock's, with REDLOCK_FENCE set
// to the fencing token, or removed when there is none (it may be a token of
// an outer redlock).
func commandEnv(env []string, fence uint64) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, envFence+"=")
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
