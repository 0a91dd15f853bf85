package main

import (
	"context"
	"fmt"
	"os"

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

If the lock is lost while held (an extension finds another owner, or no
extension reaches a majority of nodes in time), redlock says so and exits
with 76 at once, at the latest --node-timeout plus a twentieth of --ttl
before the lock's validity ends: the script must watch for that, as it
would for any job. redlock does not start the script's commands, and
cannot stop them: nothing kills them when the lock is lost, or while
redlock cannot run. Use "redlock run" for commands that must never outlive
the lock.

Exit codes:
  0              released after a signal
  64             usage error
  66             a file of --cacert, --cert or --key cannot be used
  69             a majority of nodes could not be reached
  70             other failure of redlock
  75             the lock is busy (held by another owner)
  76             the lock was lost while held
  128+N          signal N arrived while waiting for the lock

Environment:
  REDLOCK_NODES  the default of --nodes
`,
	define: func(fs *flagSet) action {
		f := &lockFlags{}
		f.register(fs, "it is let go")
		fs.BoolVar(&f.fencing, "fencing", false, "get a fencing token, printed once the lock is held")
		return func(a *app, fs *flagSet, args []string) int { return a.hold(fs, f, args) }
	},
})

func (a *app) hold(fs *flagSet, f *lockFlags, args []string) int {
	key, code, ok := a.oneKey(fs, args)
	if !ok {
		return code
	}
	if code, ok := f.check(a, fs); !ok {
		return code
	}
	return a.withLock(fs, f, key, func(lock *redlock.Lock, sigs <-chan os.Signal) int {
		return a.keep(fs.cmd, lock, f, sigs)
	})
}

// keep holds the lock until a signal arrives, or until it is lost, and
// returns the exit code.
func (a *app) keep(c *command, lock *redlock.Lock, f *lockFlags, sigs <-chan os.Signal) int {
	held, stopKeepAlive, code, ok := a.keepAlive(c, lock, f.verbose, "as soon as obtained")
	if !ok {
		return code
	}
	defer stopKeepAlive()
	if _, err := fmt.Fprintln(a.stdout, lock.Fence()); err != nil {
		// Nobody can learn that the lock is held: give it up.
		stopKeepAlive()
		a.release(c, lock, 0, f.verbose)
		a.errorf(c, "writing the fencing token: %v", err)
		return exitFailure
	}
	select {
	case s := <-sigs:
		stopKeepAlive()
		if f.verbose {
			a.errorf(c, "%v: releasing %q", s, lock.Key())
		}
		a.release(c, lock, f.cooldown, f.verbose)
		return exitOK
	case <-held.Done():
		a.errorf(c, "lock %q lost while held: %s", lock.Key(), lossReason(context.Cause(held)))
		a.dropLost(c, lock, f.verbose)
		return exitLost
	}
}
