package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// lockFlags are the flags of the commands that take a lock: run and hold.
type lockFlags struct {
	nodeFlags
	ttl          time.Duration
	wait         waitValue
	noWait       bool
	cooldown     time.Duration
	metadata     string
	fencing      bool
	restartGuard time.Duration
	lockDelay    time.Duration
	quiet        bool
	verbose      bool
	conflictCode int
	outageCode   int
	// shared and slots (run's) make the lock a reader's lease of the
	// read-write lock KEY, or a permit of the semaphore KEY of slots; a
	// plain lock is the read-write lock's writer (see taker).
	shared bool
	slots  int
}

// register defines the flags; ends says when the lock is let go ("COMMAND
// ends").
func (f *lockFlags) register(fs *flagSet, ends string) {
	f.nodeFlags.register(fs)
	fs.durationVar(&f.ttl, "ttl", defaultTTL, "the lock's TTL: how long it outlives a redlock that died;\nit is extended every third of it, and must exceed twice\n--node-timeout plus a twentieth of itself")
	fs.Var(&f.wait, "wait", "how long to wait for a busy lock, or \"forever\"; 0 tries once")
	fs.alias("w", "wait")
	fs.BoolVar(&f.noWait, "no-wait", false, "try once, do not wait (the default; as flock -n)")
	fs.alias("n", "no-wait")
	fs.durationVar(&f.cooldown, "cooldown", 0, "keep the lock this long after "+ends+", so that nobody\ntakes it again sooner")
	fs.StringVar(&f.metadata, "metadata", "", "a note stored with the lock, shown by inspect and in busy\nmessages (default \"host=HOSTNAME pid=PID\")")
	fs.durationVar(&f.restartGuard, "restart-guard", 0, "keep a node that lost its memory (restart, reload, failover, eviction,\n"+
		"flush) from voting for this long: at least the largest --ttl plus\n"+
		"--lock-delay, and --cooldown, any client uses on these nodes; 0 turns\n"+
		"the guard off (see \"redlock bootstrap\")")
	fs.durationVar(&f.lockDelay, "lock-delay", 0, "after a lock ends without a release (redlock was killed, or its host\n"+
		"paused past the lock's validity), keep the key from everyone for this\n"+
		"long after its TTL; a normal end releases at once; 0 turns it off")
	fs.IntVar(&f.conflictCode, "conflict-exit-code", exitBusy, "exit code when the lock is busy (as flock -E)")
	fs.alias("E", "conflict-exit-code")
	fs.IntVar(&f.outageCode, "outage-exit-code", exitUnavailable, "exit code when a majority of nodes cannot be reached")
	fs.BoolVar(&f.quiet, "quiet", false, "say nothing when the lock is busy (the exit code still does);\n"+
		"an outage and other failures are still reported")
	fs.BoolVar(&f.verbose, "verbose", false, "report waiting, obtaining and releasing the lock on standard error")
}

// check validates the flags; ok is false when redlock should exit with
// code, the error reported.
func (f *lockFlags) check(a *app, fs *flagSet) (code int, ok bool) {
	var msg string
	switch {
	case f.noWait && fs.isSet("wait"):
		msg = "--no-wait (-n) and --wait (-w) exclude each other"
	case f.wait.d < 0:
		msg = fmt.Sprintf("--wait %v must not be negative", f.wait.d)
	case f.cooldown < 0:
		msg = fmt.Sprintf("--cooldown %v must not be negative", f.cooldown)
	case f.restartGuard < 0:
		msg = fmt.Sprintf("--restart-guard %v must not be negative", f.restartGuard)
	case f.lockDelay < 0:
		msg = fmt.Sprintf("--lock-delay %v must not be negative", f.lockDelay)
	case f.restartGuard > 0 && f.cooldown > f.restartGuard:
		// Checked before the lock is taken: the library would refuse the
		// cooldown only at the end, after the work is done.
		msg = fmt.Sprintf("--cooldown %v is above --restart-guard %v: a node that lost its memory would vote again before the cooldown ends", f.cooldown, f.restartGuard)
	case f.shared && f.slots != 0:
		msg = "--shared and --slots exclude each other"
	case f.slots < 0 || f.slots > redlock.MaxSemaphoreSize:
		msg = fmt.Sprintf("--slots %d is not between 1 and %d", f.slots, redlock.MaxSemaphoreSize)
	case f.conflictCode < 0 || f.conflictCode > 255:
		msg = fmt.Sprintf("--conflict-exit-code %d is not between 0 and 255", f.conflictCode)
	case f.outageCode < 0 || f.outageCode > 255:
		msg = fmt.Sprintf("--outage-exit-code %d is not between 0 and 255", f.outageCode)
	default:
		return 0, true
	}
	return a.usageError(fs.cmd, msg), false
}

// options are the lock's options from the flags.
func (f *lockFlags) options(fs *flagSet) []redlock.Option {
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
	return opts
}

// withLock obtains the lock key as the flags say, and calls use with it and
// the signals that arrive from then on (forwardedSignals); use releases the
// lock. It returns use's exit code, or the code of the failure to obtain.
func (a *app) withLock(fs *flagSet, f *lockFlags, key string, use func(lock *redlock.Lock, sigs <-chan os.Signal) int) int {
	opts := f.options(fs)
	// ctx ends the wait for the lock when a signal arrives. It is
	// cancelled only after the Locker has closed: the nodes still answering
	// when a call returns (it returns once a majority has) must not be cut
	// off, or the lock would end up on fewer nodes than granted it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waitCtx := ctx
	if f.wait.d > 0 {
		var cancelWait context.CancelFunc
		waitCtx, cancelWait = context.WithTimeout(ctx, f.wait.d)
		defer cancelWait()
	}

	warn := warnings(fs.cmd, a.stderr)
	logger := warn.logger()
	if f.quiet {
		logger = quietLogger()
	}
	l, closeAll, code, ok := a.locker(fs, &f.nodeFlags, append(opts, redlock.WithLogger(logger))...)
	if !ok {
		return code
	}
	defer closeAll()

	// Listen before obtaining: a signal while waiting for the lock ends the
	// wait instead of killing redlock.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	lock, code := a.obtain(ctx, waitCtx, cancel, lockRequest{c: fs.cmd, l: l, key: key, f: f}, sigs)
	if lock == nil {
		return code
	}
	_ = warn.start() // stderr's own failure: nowhere to report it
	return use(lock, sigs)
}

// lockRequest is what a command asks for: the lock key, taken with the
// Locker l as the flags f say, for the command c (which names itself in
// messages).
type lockRequest struct {
	c   *command
	l   *redlock.Locker
	key string
	f   *lockFlags
}

// obtain gets the lock of r, waiting until waitCtx ends (--wait), or until
// a signal arrives; then it calls cancel, which ends ctx. It returns the
// lock, or nil and the exit code.
func (a *app) obtain(ctx, waitCtx context.Context, cancel context.CancelFunc, r lockRequest, sigs <-chan os.Signal) (*redlock.Lock, int) {
	c, l, key, f := r.c, r.l, r.key, r.f
	lock, sig, err := interruptible(sigs, cancel, func() (*redlock.Lock, error) {
		return a.tryThenWait(ctx, waitCtx, r)
	})
	switch {
	case sig != nil:
		if lock != nil {
			a.release(c, lock, 0, f.verbose)
		}
		notDone := "the lock was not taken"
		if c.name == "run" {
			notDone = "the command did not run"
		}
		a.errorf(c, "%v while waiting for %q: %s", sig, key, notDone)
		return nil, signalExitCode(sig)
	case err == nil:
		if f.verbose {
			a.errorf(c, "obtained %q (fencing token %d, valid until %s)", key, lock.Fence(), lock.Until().Format(time.RFC3339Nano))
		}
		return lock, exitOK
	case errors.Is(err, redlock.ErrNotObtained):
		if !f.quiet {
			a.errorf(c, "lock %q: busy, %s: %s", key, a.holder(l, key), errMsg(err))
		}
		return nil, f.conflictCode
	}
	var code int
	if abstaining(err) {
		a.errorf(c, "lock %q: nodes abstain under the restart guard: %s", key, errMsg(err))
		a.errorf(c, "a node abstains when it lost its memory, and a cluster that was never bootstrapped looks the same: run \"redlock bootstrap\" once on a new cluster, before its first run with --restart-guard (after such a run, \"redlock bootstrap --clear-quarantine\" while no lock can be held); nodes that abstain now vote again when their wait ends")
		code = exitUnavailable
	} else {
		code = a.fail(c, fmt.Sprintf("lock %q", key), err)
	}
	if code == exitUnavailable {
		code = f.outageCode
	}
	return nil, code
}

// tryThenWait tries once, and when the lock is busy or the nodes are out of
// reach and --wait allows, waits for it until waitCtx ends. The attempt is
// made whatever --wait: it is not waiting, and each of its node calls is
// bounded by --node-timeout.
func (a *app) tryThenWait(ctx, waitCtx context.Context, r lockRequest) (*redlock.Lock, error) {
	c, key, f := r.c, r.key, r.f
	try, wait := f.taker(r.l, key)
	lock, err := try(ctx)
	if err == nil || !f.wait.waits() || waitCtx.Err() != nil ||
		!errors.Is(err, redlock.ErrNotObtained) && !errors.Is(err, redlock.ErrNoQuorum) {
		return lock, err
	}
	if f.verbose {
		how := "forever"
		if !f.wait.forever {
			how = "up to " + f.wait.d.String()
		}
		a.errorf(c, "waiting %s for %q: %s", how, key, errMsg(err))
	}
	waited, werr := wait(waitCtx)
	if werr != nil && waitCtx.Err() != nil && ctx.Err() == nil &&
		!errors.Is(werr, redlock.ErrNotObtained) && !errors.Is(werr, redlock.ErrNoQuorum) {
		// --wait ran out before the wait asked any node again (a loaded
		// machine): what the nodes last said is the first attempt's answer.
		return nil, err
	}
	return waited, werr
}

// taker returns how the flags take the lock on key, once (try) or waiting
// (wait): a reader's lease of the read-write lock key (--shared), a permit
// of the semaphore key (--slots), or else the read-write lock's writer,
// which holds key itself, as a plain lock on key would, and also waits for
// the readers.
func (f *lockFlags) taker(l *redlock.Locker, key string) (try, wait func(context.Context, ...redlock.LockOption) (*redlock.Lock, error)) {
	switch {
	case f.slots > 0:
		s := l.Semaphore(key, f.slots)
		return s.TryObtain, s.Obtain
	case f.shared:
		m := l.RWMutex(key)
		return m.TryRLock, m.RLock
	}
	m := l.RWMutex(key)
	return m.TryLock, m.Lock
}

// holder describes who holds the busy lock key, from its metadata, as far
// as Inspect can tell.
func (a *app) holder(l *redlock.Locker, key string) string {
	// No deadline of our own: every node call is bounded by --node-timeout.
	// A status with some nodes failed still names the holder.
	st, err := l.Inspect(context.Background(), key)
	if st == nil {
		return "held by another owner (not named: " + errMsg(err) + ")"
	}
	var (
		held *redlock.NodeStatus
		n    int
	)
	for i := range st.Nodes {
		ns := &st.Nodes[i]
		if !ns.Held || st.Holder != "" && ns.Token != st.Holder {
			continue
		}
		if held == nil {
			held = ns
		}
		n++
	}
	if held == nil {
		return "held by another owner (readers of --shared, or permits of --slots, are not named)"
	}
	who := "an owner without metadata"
	if held.Metadata != "" {
		who = printable(held.Metadata)
	}
	left := "no expiry"
	if held.TTL >= 0 {
		left = held.TTL.Round(time.Millisecond).String() + " left"
	}
	return fmt.Sprintf("held by %s (%s, on %d of %d nodes)", who, left, n, len(st.Nodes))
}

// abstaining reports whether nodes refused to vote under the restart
// guard.
func abstaining(err error) bool {
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		return false
	}
	for _, n := range qe.Nodes {
		if errors.Is(n.Err, redlock.ErrAbstained) {
			return true
		}
	}
	return false
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

// keepAlive starts lock's KeepAlive. When KeepAlive refuses the TTL, or
// the lock is lost before it starts (the acquisition left less validity
// than the warning needs), it says so, gives the lock up and returns ok
// false with the exit code; when names the moment in the message ("as
// soon as obtained").
func (a *app) keepAlive(c *command, lock *redlock.Lock, verbose bool, when string) (held context.Context, stop func(), code int, ok bool) {
	held, stop = lock.KeepAlive(context.Background())
	err := context.Cause(held)
	if err == nil {
		return held, stop, 0, true
	}
	stop()
	if errors.Is(err, redlock.ErrInvalid) {
		a.release(c, lock, 0, verbose)
		return nil, nil, a.usageError(c, errMsg(err)), false
	}
	a.errorf(c, "lock %q lost %s: %s", lock.Key(), when, lossReason(err))
	a.dropLost(c, lock, verbose)
	return nil, nil, exitLost, false
}

// dropLost removes what is left of a lost lock: our keys may survive on a
// minority of nodes (those that could not be reached), and others need not
// wait for them to expire. The lock is lost either way.
func (a *app) dropLost(c *command, lock *redlock.Lock, verbose bool) {
	if err := lock.Release(context.Background()); err != nil && verbose {
		a.errorf(c, "cleaning up the lost lock: %s", errMsg(err))
	}
}
