package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// envTerm names the variable that passes the leader's term to the command.
const envTerm = "REDLOCK_TERM"

// Defaults of elect's flags.
const (
	defaultElectTTL     = 10 * time.Second
	defaultRestartDelay = time.Second
)

// exitNoLeader is leader's exit code when nobody leads.
const exitNoLeader = 1

var _ = register(&command{
	name:     "elect",
	synopsis: "[flags] NAME -- COMMAND [ARGS...]",
	help: `Campaign in the election NAME and run COMMAND while leading: one process at
a time, among all that campaign for NAME on these nodes, runs its COMMAND.
redlock waits until it leads (or --wait runs out), runs COMMAND with the
leader's term in $` + envTerm + `, keeps the leadership extended while it runs, and
resigns when COMMAND ends, so that another campaigner leads at once. A
leader that dies without resigning is replaced within --ttl.

If leadership is lost while COMMAND runs (an extension finds another leader,
or none reaches a majority of nodes in time), COMMAND's process group gets
SIGTERM, and SIGKILL --grace later but before the leadership's validity
ends, as with "redlock run" (SIGTERM gets at most half of --node-timeout
plus a twentieth of --ttl: 500ms with the defaults); a watchdog process
kills the group while redlock cannot run; redlock exits with 76. It resigns
(or campaigns again) only once every process of COMMAND's group has ended.
Signals sent to redlock are forwarded to COMMAND as with "redlock run";
while campaigning, a signal ends the campaign. --wait 0 (-n) tries once,
as with "redlock run"; the default is to campaign until a signal.

With --restart, redlock campaigns again --restart-delay after COMMAND exits
or leadership is lost, and goes on until a signal: a standby that takes over
whenever the leader goes away. It then exits with COMMAND's code (or 128+N
for a signal N that came while it campaigned).

Environment:
  REDLOCK_NODES  the default of --nodes; not passed to COMMAND (unless
                 --pass-nodes)
  REDLOCK_TERM   set for COMMAND: the leader's term, which grows from one
                 leader to the next (a fencing token)
`,
	exits: []exitDoc{
		{"COMMAND's own", "when it ran; 128+N when signal N ended it"},
		exitDocUsage,
		exitDocNoInput,
		exitDocUnavailable,
		exitDocFailure,
		{"75", "--wait ran out (or -n tried once) while another led"},
		{"76", "leadership was lost while COMMAND ran"},
		exitDocConfig,
		{"126, 127", "COMMAND could not be started, or was not found"},
		{"128+N", "with --restart: signal N came while it campaigned"},
	},
	define: defineElect,
})

var _ = register(&command{
	name:     "leader",
	synopsis: "[flags] NAME",
	help: `Print who leads the election NAME: the metadata the leader published, its
term and the time its keys have left on a majority of nodes. With --watch,
print it again at every change of leader (a new leader, or none) until
SIGINT or SIGTERM; while a majority of nodes cannot be reached, nothing is
printed. With --json, each state is one JSON object on a line of its own:
{"name", "leading", "metadata", "term", "ttl_ms"} (ttl_ms -1 without expiry).
`,
	exits: []exitDoc{
		{"0", "someone leads (with --watch: stopped by a signal)"},
		{"1", "nobody leads"},
		exitDocUsage,
		exitDocNoInput,
		{"69", "fewer than a majority of nodes answered"},
		exitDocFailure,
		exitDocConfig,
	},
	define: func(fs *flagSet) action {
		f := &leaderFlags{}
		f.register(fs)
		fs.BoolVar(&f.json, "json", false, "print each state as one JSON object on a line")
		fs.BoolVar(&f.watch, "watch", false, "print the state again at every change of leader, until a signal")
		return func(a *app, fs *flagSet, args []string) int { return a.leader(fs, f, args) }
	},
})

type leaderFlags struct {
	nodeFlags
	json, watch bool
}

type electFlags struct {
	nodeFlags
	ttl          time.Duration
	wait         waitValue
	noWait       bool
	grace        time.Duration
	unsafeGrace  bool
	passNodes    bool
	metadata     string
	restartGuard time.Duration
	restart      bool
	restartDelay time.Duration
	verbose      bool
}

func defineElect(fs *flagSet) action {
	f := &electFlags{}
	f.register(fs)
	fs.durationVar(&f.ttl, "ttl", defaultElectTTL, "the leadership's TTL: how long the election stays without a leader\n"+
		"after a leader died; it is extended every third of it, and must exceed\n"+
		"twice --node-timeout plus a twentieth of itself")
	f.wait = waitValue{forever: true}
	fs.Var(&f.wait, "wait", "how long to campaign, or \"forever\" (until a signal); 0 tries once")
	fs.alias("w", "wait")
	fs.BoolVar(&f.noWait, "no-wait", false, "try once, do not wait (as --wait 0)")
	fs.alias("n", "no-wait")
	registerGrace(fs, &f.grace, &f.unsafeGrace, "lost leadership")
	fs.BoolVar(&f.passNodes, "pass-nodes", false, "leave $"+envNodes+" in COMMAND's environment (it is removed:\nit may hold passwords)")
	fs.StringVar(&f.metadata, "metadata", "", "what the leader publishes, shown by \"redlock leader\"\n(default \"host=HOSTNAME pid=PID\")")
	fs.durationVar(&f.restartGuard, "restart-guard", 0, "as for \"redlock run\": keep a node that lost its memory out of\nevery vote this long (at least --ttl); 0 turns the guard off")
	fs.BoolVar(&f.restart, "restart", false, "campaign again when COMMAND exits or leadership is lost,\nuntil a signal")
	fs.durationVar(&f.restartDelay, "restart-delay", defaultRestartDelay, "with --restart, the pause before campaigning again")
	fs.BoolVar(&f.verbose, "verbose", false, "report campaigning, leading and resigning on standard error")
	return func(a *app, fs *flagSet, args []string) int { return a.elect(fs, f, args) }
}

func (a *app) elect(fs *flagSet, f *electFlags, args []string) int {
	pos, argv, code, ok := a.parseCommandLine(fs, args, "NAME")
	if !ok {
		return code
	}
	switch {
	case f.noWait && fs.isSet("wait"):
		return a.usageError(fs.cmd, "--no-wait (-n) and --wait (-w) exclude each other")
	case f.wait.d < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--wait %v must not be negative", f.wait.d))
	case f.grace < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--grace %v must not be negative", f.grace))
	case f.restartGuard < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--restart-guard %v must not be negative", f.restartGuard))
	case f.restartDelay < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--restart-delay %v must not be negative", f.restartDelay))
	}
	name := pos[0]
	if _, err := exec.LookPath(argv[0]); err != nil {
		return a.cannotRun(fs.cmd, argv[0], err)
	}
	if !fs.isSet("metadata") {
		f.metadata = defaultMetadata()
	}
	opts := []redlock.Option{redlock.WithTTL(f.ttl), redlock.WithMetadata(f.metadata)}
	if f.restartGuard > 0 {
		opts = append(opts, redlock.WithRestartGuard(f.restartGuard))
	}
	warn := warnings(fs.cmd, a.stderr)
	opts = append(opts, redlock.WithLogger(warn.logger()))
	l, closeAll, code, ok := a.locker(fs, &f.nodeFlags, opts...)
	if !ok {
		return code
	}
	defer closeAll()

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	for {
		lead, code := a.campaign(fs.cmd, l, name, f, sigs)
		if lead == nil {
			return code
		}
		_ = warn.start() // stderr's own failure: nowhere to report it
		code, signalled := a.lead(fs.cmd, lead, argv, f, sigs)
		if !f.restart || signalled {
			return code
		}
		if f.verbose {
			a.errorf(fs.cmd, "campaigning again for %q in %v", name, f.restartDelay)
		}
		t := time.NewTimer(f.restartDelay)
		select {
		case s := <-sigs:
			t.Stop()
			return signalExitCode(s)
		case <-t.C:
		}
	}
}

// campaign waits until we lead name, --wait runs out, or a signal arrives.
// It returns the leadership, or nil and the exit code.
func (a *app) campaign(c *command, l *redlock.Locker, name string, f *electFlags, sigs <-chan os.Signal) (*redlock.Leadership, int) {
	// ctx ends the campaign only: the leadership outlives it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var opts []redlock.LockOption
	switch {
	case f.noWait || !f.wait.waits():
		opts = append(opts, redlock.WithRetry(redlock.NoRetry()))
	case !f.wait.forever:
		ctx, cancel = context.WithTimeout(ctx, f.wait.d)
		defer cancel()
	}
	if f.verbose {
		a.errorf(c, "campaigning for %q", name)
	}
	lead, sig, err := interruptible(sigs, cancel, func() (*redlock.Leadership, error) {
		return l.Campaign(ctx, name, opts...)
	})
	switch {
	case sig != nil:
		if lead != nil {
			a.resign(c, lead, f.verbose)
		}
		a.errorf(c, "%v while campaigning for %q: the command did not run", sig, name)
		return nil, signalExitCode(sig)
	case err == nil:
		if f.verbose {
			a.errorf(c, "leading %q (term %d, valid until %s)", name, lead.Term(), lead.Until().Format(time.RFC3339Nano))
		}
		return lead, exitOK
	}
	return nil, a.fail(c, fmt.Sprintf("election %q", name), err)
}

// lead runs the command while leading, and resigns when it has exited. It
// returns the exit code, and whether a signal came for the command.
func (a *app) lead(c *command, lead *redlock.Leadership, argv []string, f *electFlags, sigs <-chan os.Signal) (code int, signalled bool) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.Env = electEnv(a.environ(), lead.Term(), f.passNodes)
	setProcessGroup(cmd, nil) // an election runs its command without the terminal's foreground
	end, err := a.superviseCommand(&guarded{
		c:     c,
		what:  fmt.Sprintf("leadership of %q", lead.Name()),
		held:  lead.Context(),
		until: lead.Until,
		p:     newKillPolicy(f.ttl, f.nodeTimeout, f.grace, f.unsafeGrace),
		cmd:   cmd,
	}, sigs)
	switch {
	case err != nil:
		a.resign(c, lead, f.verbose)
		return a.startFailed(c, argv[0], err), false
	case end.lost != nil:
		// What is left of our keys goes, so that the next leader need
		// not wait for them to expire.
		if err := lead.Resign(context.Background()); err != nil && f.verbose {
			a.errorf(c, "cleaning up the lost leadership: %s", errMsg(err))
		}
		return exitLost, end.signalled
	case end.failed:
		a.resign(c, lead, f.verbose)
		return exitFailure, end.signalled
	}
	a.resign(c, lead, f.verbose)
	return end.code, end.signalled
}

// resign gives up the leadership. A failure is reported but does not change
// the exit code: the keys expire by their TTL.
func (a *app) resign(c *command, lead *redlock.Leadership, verbose bool) {
	err := lead.Resign(context.Background())
	switch {
	case err != nil:
		a.errorf(c, "warning: resigning %q: %s (its keys expire by their TTL)", lead.Name(), errMsg(err))
	case verbose:
		a.errorf(c, "resigned %q", lead.Name())
	}
}

// electEnv is the command's environment: run's (commandEnv: no
// REDLOCK_FENCE of an outer redlock, no REDLOCK_NODES unless passNodes),
// with REDLOCK_TERM set to the term.
func electEnv(env []string, term uint64, passNodes bool) []string {
	env = slices.DeleteFunc(commandEnv(env, 0, passNodes), func(kv string) bool {
		return strings.HasPrefix(kv, envTerm+"=")
	})
	return append(env, envTerm+"="+strconv.FormatUint(term, 10))
}

func (a *app) leader(fs *flagSet, f *leaderFlags, args []string) int {
	name, code, ok := a.oneKey(fs, args)
	if !ok {
		return code
	}
	l, closeAll, code, ok := a.locker(fs, &f.nodeFlags)
	if !ok {
		return code
	}
	defer closeAll()
	if f.watch {
		return a.watchLeader(fs.cmd, l, name, f.json)
	}
	info, err := l.Leader(context.Background(), name)
	if err != nil {
		return a.fail(fs.cmd, fmt.Sprintf("leader of %q", name), err)
	}
	if err := writeLeader(a.stdout, info, f.json); err != nil {
		a.errorf(fs.cmd, "writing the leader: %v", err)
		return exitFailure
	}
	if !info.Leading {
		return exitNoLeader
	}
	return exitOK
}

// watchLeader prints the election's state at every change until SIGINT or
// SIGTERM.
func (a *app) watchLeader(c *command, l *redlock.Locker, name string, asJSON bool) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	states, err := l.Observe(ctx, name)
	if err != nil {
		return a.fail(c, fmt.Sprintf("leader of %q", name), err)
	}
	for info := range states {
		if err := writeLeader(a.stdout, info, asJSON); err != nil {
			a.errorf(c, "writing the leader: %v", err)
			return exitFailure
		}
	}
	return exitOK
}

// leaderJSON is the --json form of a LeaderInfo.
type leaderJSON struct {
	Name     string `json:"name"`
	Leading  bool   `json:"leading"`
	Metadata string `json:"metadata,omitempty"`
	Term     uint64 `json:"term,omitempty"`
	// TTLMs is the time the leader's keys have left in milliseconds, -1
	// without expiry; 0 when nobody leads.
	TTLMs int64 `json:"ttl_ms,omitempty"`
}

// writeLeader prints one state of an election, as a sentence or as JSON.
func writeLeader(w io.Writer, info redlock.LeaderInfo, asJSON bool) error {
	if asJSON {
		out := leaderJSON{Name: info.Name, Leading: info.Leading, Metadata: info.Metadata, Term: info.Term}
		if info.Leading {
			out.TTLMs = info.TTL.Milliseconds()
			if info.TTL < 0 {
				out.TTLMs = -1
			}
		}
		return json.NewEncoder(w).Encode(out)
	}
	if !info.Leading {
		_, err := fmt.Fprintf(w, "election %s: no leader\n", strconv.Quote(info.Name))
		return err
	}
	ttl := "no expiry"
	if info.TTL >= 0 {
		ttl = info.TTL.String() + " left"
	}
	_, err := fmt.Fprintf(w, "election %s: led by %s, term %d, %s\n", strconv.Quote(info.Name), strconv.Quote(info.Metadata), info.Term, ttl)
	return err
}
