// Redlock runs a command under a distributed lock held on a majority of
// independent Redis masters: flock(1) across machines, for cron jobs and
// deploy scripts that must not run twice at once.
//
// Usage:
//
//	redlock run [flags] KEY -- COMMAND [ARGS...]
//	redlock hold [flags] KEY
//	redlock inspect [flags] KEY
//	redlock release --force --yes [flags] KEY
//	redlock bootstrap [flags]
//	redlock doctor [--json] [flags]
//	redlock elect [--restart] [flags] NAME -- COMMAND [ARGS...]
//	redlock leader [flags] NAME
//
// run obtains the lock KEY, starts COMMAND, extends the lock in the
// background while COMMAND runs, and releases it when every process of
// COMMAND's process group has ended. If the lock is lost meanwhile, the
// group gets SIGTERM at once and SIGKILL after a grace period, always
// before the lock's validity ends; a watchdog process enforces that while
// redlock itself cannot run. Signals sent to redlock (SIGINT, SIGTERM, SIGHUP, SIGQUIT,
// SIGUSR1, SIGUSR2) are forwarded to COMMAND, and the lock is released once
// it has exited. When redlock runs in the foreground of a terminal that is
// its standard input, COMMAND gets the terminal's foreground while it runs,
// so that an interactive command works and Ctrl-C reaches it. flock's habits
// carry over: -n (try once, the default), -w SECONDS, --wait forever, -E for
// the exit code of a busy lock (and --outage-exit-code for an outage).
//
// hold obtains the lock KEY, prints its fencing token, and keeps the lock
// until a signal: a script locks around several commands with it. It
// stops its own process group, the script's, as run stops COMMAND's,
// unless --no-kill-group, it leads that group, or the group is an
// interactive shell's.
//
// doctor checks that the nodes meet the assumptions the locks' safety rests
// on (independent masters, persistence or the restart guard, no eviction,
// clocks that agree, one vote per server) and says what to fix; it exits 0
// when all is well, 1 with warnings only, 2 with errors and 69 when a node
// could not be reached.
// elect campaigns in the election NAME and runs COMMAND while leading, with
// the leader's term in REDLOCK_TERM; it resigns when COMMAND ends, so that
// another campaigner leads at once (with --restart it then campaigns
// again). leader prints who leads (--json, --watch).
//
// The nodes are redis:// or rediss:// URLs of standalone masters (or
// host:port, taken as redis://host:port), redis+cluster:// or
// rediss+cluster:// URLs of Redis Clusters and redis+sentinel:// or
// rediss+sentinel:// URLs of Sentinel groups, given with --nodes or in the
// REDLOCK_NODES environment variable; --tls-ca, --tls-cert and --tls-key
// set up TLS for the rediss nodes. Passwords in them never appear in redlock's
// output, and run and elect do not pass REDLOCK_NODES on to COMMAND unless
// told to (--pass-nodes).
//
// Exit codes: COMMAND's own code when it ran (128+N when signal N ended it);
// otherwise 64 for a usage error, 65 when --slots differs from the
// semaphore's size, 66 when a TLS file cannot be used, 69 when a majority
// of nodes could not be reached, 70 for any other failure of redlock
// itself, 75 when the lock is busy, 76 when the lock was lost while
// COMMAND ran, 78 when the nodes refuse our commands for good (a wrong
// password, a missing ACL permission, a database out of range, replicas,
// TLS on one side only), 126 when COMMAND could not be started and 127
// when it was not found. Each command's --help lists its own.
//
// "redlock COMMAND --help" tells more, "redlock help COMMAND" all of it;
// docs/cli.md is the full reference.
package main
