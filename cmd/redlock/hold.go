package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

var _ = register(&command{
	name:     "hold",
	synopsis: "[flags] KEY",
	help: `Obtain the lock KEY on a majority of the nodes, print its fencing token on a
line of its own (0 without --fencing) once it is held, and keep it, extended
every third of --ttl, until redlock gets SIGINT, SIGTERM, SIGHUP, SIGQUIT,
SIGUSR1 or SIGUSR2; then release it and exit 0. This is "redlock run"
without a command, for a script that locks around several commands: start
it in the background, read its line (an empty read means it exited without
the lock: its exit code says why), run the commands, then kill it.

redlock shares the process group of the script that started it in the
background (a shell without job control, as a script is, keeps its
background jobs in its own group): that group is guarded as run guards
its command's. If the lock is lost while held (an extension finds another
owner, or no extension reaches a majority of nodes in time), redlock says
so, leaves the group, and sends it SIGTERM at once, at the latest
--node-timeout plus a twentieth of --ttl (the warning lead) before the
lock's validity ends, and SIGKILL --grace later, but at the latest half
the lead before it (--unsafe-grace lifts that bound); then it exits with
76. While redlock itself cannot run (stopped, starved), a watchdog process
kills the group with SIGKILL a quarter of the lead before the validity it
last extended ends, redlock with it; if redlock dies (SIGKILL: stop it
with one of the signals above), the watchdog kills the group at once.

The group is not touched, and nothing stops the commands that use the
lock, with --no-kill-group, when redlock leads its own group (a shell with
job control started it: nothing shares it), or when the group is an
interactive shell's (the terminal's foreground, led by the session leader);
--verbose says so. The script must then watch for redlock's exit itself.
A process that leaves the group (setsid, a daemon) is never covered. Use
"redlock run" for a command that must never outlive the lock.

Environment:
  REDLOCK_NODES  the default of --nodes
`,
	exits: []exitDoc{
		{"0", "released after a signal"},
		exitDocUsage,
		exitDocNoInput,
		exitDocUnavailable,
		exitDocFailure,
		{"75", "the lock is busy (held by another owner)"},
		{"76", "the lock was lost while held"},
		exitDocConfig,
		{"128+N", "signal N arrived while waiting for the lock"},
	},
	define: func(fs *flagSet) action {
		f := &holdFlags{}
		f.register(fs, "it is let go")
		fs.BoolVar(&f.fencing, "fencing", false, "get a fencing token, printed once the lock is held")
		registerGrace(fs, &f.grace, &f.unsafeGrace, "a lost lock")
		fs.BoolVar(&f.noKillGroup, "no-kill-group", false, "do not stop redlock's process group (the script) when the lock\n"+
			"is lost: the script may then still run while another holder runs")
		return func(a *app, fs *flagSet, args []string) int { return a.hold(fs, f, args) }
	},
})

type holdFlags struct {
	lockFlags
	grace       time.Duration
	unsafeGrace bool
	noKillGroup bool
}

func (a *app) hold(fs *flagSet, f *holdFlags, args []string) int {
	key, code, ok := a.oneKey(fs, args)
	if !ok {
		return code
	}
	if f.grace < 0 {
		return a.usageError(fs.cmd, fmt.Sprintf("--grace %v must not be negative", f.grace))
	}
	if code, ok := f.check(a, fs); !ok {
		return code
	}
	return a.withLock(fs, &f.lockFlags, key, func(lock *redlock.Lock, sigs <-chan os.Signal) int {
		return a.keep(fs.cmd, lock, f, sigs)
	})
}

// keep holds the lock until a signal arrives, or until it is lost, and
// returns the exit code. Unless --no-kill-group, or an interactive shell
// shares it, redlock's process group (the script that started it) is
// guarded as run guards its command's: stopped when the lock is lost, and
// by a watchdog while redlock cannot run.
func (a *app) keep(c *command, lock *redlock.Lock, f *holdFlags, sigs <-chan os.Signal) int {
	held, stopKeepAlive, code, ok := a.keepAlive(c, lock, f.verbose, "as soon as obtained")
	if !ok {
		return code
	}
	defer stopKeepAlive()
	var g *scriptGuard
	if !f.noKillGroup {
		grp, why := ownGroup()
		if why != "" {
			if f.verbose {
				a.errorf(c, "nothing will stop the commands that use the lock when it is lost: %s", why)
			}
		} else {
			var err error
			g, err = startScriptGuard(a, grp, newKillPolicy(f.ttl, f.nodeTimeout, f.grace, f.unsafeGrace), lock.Until())
			if err != nil {
				stopKeepAlive()
				a.release(c, lock, 0, f.verbose)
				a.errorf(c, "%v: the lock is released", err)
				return exitFailure
			}
			defer g.wd.stop()
		}
	}
	if _, err := fmt.Fprintln(a.stdout, lock.Fence()); err != nil {
		// Nobody can learn that the lock is held: give it up.
		stopKeepAlive()
		a.release(c, lock, 0, f.verbose)
		a.errorf(c, "writing the fencing token: %v", err)
		return exitFailure
	}
	var renewC <-chan time.Time
	var wdExited <-chan struct{}
	if g != nil {
		// As in superviseCommand: the watchdog hears of each extension
		// well before its deadline.
		renew := time.NewTicker(max(g.p.lead/8, time.Millisecond))
		defer renew.Stop()
		renewC, wdExited = renew.C, g.wd.exited
	}
	last := lock.Until()
	for {
		select {
		case s := <-sigs:
			stopKeepAlive()
			if g != nil {
				g.wd.stop()
			}
			if f.verbose {
				a.errorf(c, "%v: releasing %q", s, lock.Key())
			}
			a.release(c, lock, f.cooldown, f.verbose)
			return exitOK
		case <-renewC:
			if u := lock.Until(); !u.Equal(last) {
				last = u
				if err := g.wd.killAt(g.p.watchdogDeadline(u)); err != nil {
					a.errorf(c, "%v", err)
				}
			}
		case <-wdExited:
			stopKeepAlive()
			a.errorf(c, "the watchdog ended (%v): killing the process group %d (the script), which nothing would stop if redlock could not run", g.wd.err, g.grp.id())
			g.stop(a, c, time.Now())
			a.release(c, lock, 0, f.verbose)
			return exitFailure
		case <-held.Done():
			reason := lossReason(context.Cause(held))
			if g == nil {
				a.errorf(c, "lock %q lost while held: %s", lock.Key(), reason)
			} else {
				now := time.Now()
				kill := g.p.killTime(now, lock.Until())
				a.errorf(c, "lock %q lost while held: %s; sending SIGTERM to the process group %d (the script), and SIGKILL in %v", lock.Key(), reason, g.grp.id(), max(kill.Sub(now), 0).Round(time.Millisecond))
				g.stop(a, c, kill)
			}
			a.dropLost(c, lock, f.verbose)
			return exitLost
		}
	}
}

// scriptGuard guards hold's script: redlock's own process group.
type scriptGuard struct {
	grp procGroup
	p   killPolicy
	wd  *watchdog
}

// startScriptGuard starts the watchdog that kills grp at the deadline of
// the lock valid until until, unless told of a later one.
func startScriptGuard(a *app, grp procGroup, p killPolicy, until time.Time) (*scriptGuard, error) {
	wd, err := startWatchdog(a.stderr, a.environ())
	if err != nil {
		return nil, err
	}
	err = wd.killAt(p.watchdogDeadline(until))
	if err == nil {
		err = wd.watch(grp)
	}
	if err != nil {
		wd.stop()
		return nil, err
	}
	return &scriptGuard{grp: grp, p: p, wd: wd}, nil
}

// stop leaves the group, sends it SIGTERM, and SIGKILL at kill if it still
// runs then, and returns once it is empty or killed; then the watchdog
// has nothing left to do. (Its leader is the script, whose parent, not
// redlock, reaps it: redlock does not wait for that.) redlock cannot leave
// the group only in odd cases (it leads its session): it kills the group
// at once then, itself with it.
func (g *scriptGuard) stop(a *app, c *command, kill time.Time) {
	defer g.wd.stop()
	if err := leaveGroup(); err != nil {
		a.errorf(c, "leaving the process group: %v; sending it SIGKILL, redlock included", err)
		a.signalGroup(c, g.grp, sigKill)
	}
	a.signalGroup(c, g.grp, sigTerm)
	killTimer := time.NewTimer(time.Until(kill))
	defer killTimer.Stop()
	poll := time.NewTicker(groupPoll)
	defer poll.Stop()
	for g.grp.alive() {
		select {
		case <-killTimer.C:
			a.errorf(c, "the process group %d still runs after SIGTERM; sending SIGKILL", g.grp.id())
			a.signalGroup(c, g.grp, sigKill)
			return
		case <-poll.C:
		}
	}
}
