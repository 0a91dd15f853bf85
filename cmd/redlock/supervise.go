package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"time"
)

// groupPoll is how often redlock looks whether a command that exited left
// processes in its group behind: no system call waits for a process group
// to empty.
const groupPoll = 50 * time.Millisecond

// killPolicy says when a command whose lock (or leadership) is lost gets
// SIGTERM and SIGKILL.
//
// KeepAlive warns of a loss at the latest lead before the lock's validity
// ends: the node timeout plus a twentieth of the TTL (at least 5 ms), as
// its documentation states. The command's process group gets SIGTERM then,
// and SIGKILL --grace later, but no later than half the lead before the
// validity ends (unless --unsafe-grace): SIGTERM gets at most half the lead
// (a second with run's defaults), and the other half covers timers and
// signals running late on a loaded machine. Nobody else can hold the lock
// before its validity ends, so nobody else's command overlaps ours.
type killPolicy struct {
	lead        time.Duration
	grace       time.Duration
	unsafeGrace bool
}

func newKillPolicy(ttl, nodeTimeout, grace time.Duration, unsafeGrace bool) killPolicy {
	return killPolicy{lead: nodeTimeout + max(ttl/20, 5*time.Millisecond), grace: grace, unsafeGrace: unsafeGrace}
}

// killTime is when the group gets SIGKILL after a SIGTERM at term, for a
// lock valid until until.
func (p killPolicy) killTime(term, until time.Time) time.Time {
	t := term.Add(p.grace)
	if limit := until.Add(-p.lead / 2); !p.unsafeGrace && t.After(limit) {
		t = limit
	}
	return t
}

// watchdogDeadline is when the watchdog kills the group of a lock valid
// until until, if redlock extends it no further: a quarter of the lead
// before the validity ends, after redlock's own SIGKILL (so that redlock,
// when it runs, is the one to say why), with a quarter left for the
// signal to land.
func (p killPolicy) watchdogDeadline(until time.Time) time.Time {
	d := until.Add(-p.lead / 4)
	if late := until.Add(-p.lead + p.grace + p.lead/4); p.unsafeGrace && late.After(d) {
		d = late
	}
	return d
}

// guarded is a command to run under a lock or leadership.
type guarded struct {
	c     *command
	what  string          // what is held, for messages: `lock "k"`
	held  context.Context // ends, with the cause, when it is lost
	until func() time.Time
	p     killPolicy
	cmd   *exec.Cmd
	tty   *terminal // the terminal the command gets, or nil
}

// guardedEnd is how a guarded command ended.
type guardedEnd struct {
	code      int   // the command's exit code (128+N for signal N)
	lost      error // why the lock was lost, nil if it was not
	signalled bool  // a signal came for the command
	failed    bool  // the watchdog failed: redlock stopped the command
}

// superviseCommand starts g.cmd under a watchdog, forwards sigs to its
// process group, stops the group if the lock is lost (see killPolicy), and
// returns once every process of the group has ended: the lock must be
// kept, or the group killed by its deadline, as long as one runs. It
// returns an error when the command could not be started (or the watchdog
// that must guard it); nothing runs then.
func (a *app) superviseCommand(g *guarded, sigs <-chan os.Signal) (guardedEnd, error) {
	c := g.c
	wd, err := startWatchdog(a.stderr, a.environ())
	if err != nil {
		return guardedEnd{}, err
	}
	defer wd.stop()
	last := g.until()
	if err := wd.killAt(g.p.watchdogDeadline(last)); err != nil {
		return guardedEnd{}, err
	}
	if g.cmd.Err != nil {
		return guardedEnd{}, &startError{g.cmd.Err}
	}
	open, err := gate(g.cmd)
	if err != nil {
		return guardedEnd{}, err
	}
	if err := g.cmd.Start(); err != nil {
		_ = open(false)
		a.takeBack(c, g.cmd, g.tty)
		return guardedEnd{}, &startError{err}
	}
	g.tty.started()
	grp := groupOf(g.cmd.Process)
	var end guardedEnd
	// The command runs once the watchdog knows its group, not before.
	err = wd.watch(grp)
	if err == nil {
		err = open(true)
	} else {
		_ = open(false)
	}
	if err != nil {
		a.errorf(c, "starting the command: %v", err)
		a.signalGroup(c, grp, sigKill)
		end.failed = true
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		defer close(exited)
		end.code, waitErr = g.tty.wait(g.cmd, func() {
			a.errorf(c, "resuming the suspended command: it holds %s, which a suspended command would keep from everyone", g.what)
		})
	}()

	// The watchdog learns of each extension from Until, looked at often
	// enough that it hears of it well before its deadline: an extension
	// succeeds by lead before the validity's end, the deadline is a quarter
	// of the lead before it.
	renew := time.NewTicker(max(g.p.lead/8, time.Millisecond))
	defer renew.Stop()
	var (
		exitedC   = exited
		renewC    = renew.C
		lostC     = g.held.Done()
		wdC       = wd.exited
		killTimer *time.Timer
		killC     <-chan time.Time
		poll      *time.Ticker
		pollC     <-chan time.Time
	)
	defer func() {
		if killTimer != nil {
			killTimer.Stop()
		}
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		select {
		case <-exitedC:
			exitedC = nil
			a.takeBack(c, g.cmd, g.tty)
			if waitErr != nil {
				a.errorf(c, "waiting for the command: %v", waitErr)
			}
			if !grp.alive() {
				return a.ended(g, end), nil
			}
			if end.lost == nil {
				a.errorf(c, "the command exited, leaving processes in its process group: keeping %s until they end", g.what)
			}
			poll = time.NewTicker(groupPoll)
			pollC = poll.C
		case <-pollC:
			if !grp.alive() {
				return a.ended(g, end), nil
			}
		case s := <-sigs:
			end.signalled = true
			a.signalGroup(c, grp, s)
		case <-renewC:
			if u := g.until(); !u.Equal(last) {
				last = u
				if err := wd.killAt(g.p.watchdogDeadline(u)); err != nil {
					a.errorf(c, "%v", err)
				}
			}
		case <-lostC:
			lostC, renewC = nil, nil
			end.lost = context.Cause(g.held)
			now := time.Now()
			kill := g.p.killTime(now, g.until())
			a.errorf(c, "%s lost while the command ran: %s; sending SIGTERM, and SIGKILL in %v", g.what, lossReason(end.lost), max(kill.Sub(now), 0).Round(time.Millisecond))
			a.signalGroup(c, grp, sigTerm)
			killTimer = time.NewTimer(time.Until(kill))
			killC = killTimer.C
		case <-killC:
			killC = nil
			if grp.alive() {
				a.errorf(c, "the command's process group still runs after SIGTERM; sending SIGKILL")
				a.signalGroup(c, grp, sigKill)
			}
		case <-wdC:
			wdC = nil
			end.failed = true
			a.errorf(c, "the watchdog ended (%v): killing the command, which nothing would stop if redlock could not run", wd.err)
			a.signalGroup(c, grp, sigKill)
		}
	}
}

// errStopped is the loss that redlock finds on its own when its command's
// group ends after the lock's warning time, before KeepAlive could say so:
// redlock was stopped or starved, and its watchdog may have killed the
// command.
var errStopped = errors.New("its validity ended, or nearly, while redlock could not run (stopped or starved)")

// ended completes end once the group is empty: a lock whose warning time
// has passed counts as lost, even if KeepAlive has not said so yet (it
// would, and no extension counts any more).
func (a *app) ended(g *guarded, end guardedEnd) guardedEnd {
	switch {
	case end.lost != nil:
		return end
	case g.held.Err() != nil:
		end.lost = context.Cause(g.held)
	case !time.Now().Before(g.until().Add(-g.p.lead)):
		end.lost = errStopped
	default:
		return end
	}
	a.errorf(g.c, "%s lost while the command ran: %s", g.what, lossReason(end.lost))
	return end
}

// signalGroup sends sig to the command's process group. A group that has
// ended already is no error.
func (a *app) signalGroup(c *command, g procGroup, sig os.Signal) {
	if err := g.signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		a.errorf(c, "sending %v to the command: %v", sig, err)
	}
}

// startError is superviseCommand's error when the command itself could
// not be started.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// startFailed reports a guarded command that could not be started: the
// command itself (126 or 127), or its watchdog (70).
func (a *app) startFailed(c *command, name string, err error) int {
	var se *startError
	if errors.As(err, &se) {
		return a.cannotRun(c, name, se.err)
	}
	a.errorf(c, "%v: the command did not run", err)
	return exitFailure
}
