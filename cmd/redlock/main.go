package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
)

// Exit codes of redlock itself. When the command ran, run exits with the
// command's own code instead. The numbers follow sysexits.h where one fits,
// and the shell's 126/127 for a command that cannot be started.
const (
	exitOK          = 0
	exitUsage       = 64  // bad flags or arguments (EX_USAGE)
	exitUnavailable = 69  // a majority of nodes could not be reached (EX_UNAVAILABLE)
	exitFailure     = 70  // any other failure of redlock itself (EX_SOFTWARE)
	exitBusy        = 75  // the lock is held by another owner (EX_TEMPFAIL)
	exitLost        = 76  // the lock was lost while the command ran
	exitSize        = 65  // the semaphore has another number of permits than --slots (EX_DATAERR)
	exitConfig      = 78  // the nodes refuse our commands for good: password, ACL (EX_CONFIG)
	exitCannotRun   = 126 // the command was found but could not be started
	exitNotFound    = 127 // the command was not found
)

// envNodes names the environment variable that --nodes defaults to.
const envNodes = "REDLOCK_NODES"

const topUsage = `usage: redlock COMMAND [flags] [ARGS]

Run a command under a distributed lock held on a majority of independent
Redis masters (Redlock), or look after such locks.

Commands:
  run        run a command while holding a lock
  hold       take a lock and keep it until a signal (for scripts)
  inspect    show each node's holder, metadata and TTL of a lock
  release    remove a stuck lock, whoever holds it (--force --yes)
  bootstrap  seed the restart-guard markers on a fresh cluster
  doctor     check that the nodes meet the safety model's assumptions
  elect      run a command while leading an election (one leader at a time)
  leader     show who leads an election

The nodes are comma-separated URLs, redis:// or rediss:// for a standalone
master, redis+cluster:// for a Redis Cluster, redis+sentinel:// for a
Sentinel group (rediss+... with TLS), from
--nodes or the REDLOCK_NODES environment variable. A KEY is any name of up to 4096
bytes that does not start with "redlock:": that prefix is reserved for the
library's own keys (restart-guard markers, fencing counters).

Run "redlock COMMAND --help" for a command's flags and exit codes,
"redlock --version" for the version.
`

// app is one invocation of redlock: where it writes, and what it reads from
// its environment.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	environ        func() []string
}

// go-redis's own log lines about the Locker's connections (failed dials
// and the like) stay out of stderr: the library's RedisLogger drops them,
// and redlock reports node failures itself, with addresses redacted.
func main() {
	redis.SetLogger(redlock.RedisLogger(nil))
	a := &app{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, environ: os.Environ}
	os.Exit(a.main(os.Args[1:]))
}

// main runs one invocation and returns its exit code.
func (a *app) main(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.stderr, topUsage)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(rest) > 0 {
			if c := commands[rest[0]]; c != nil {
				fs := c.newFlags()
				c.define(fs)
				fs.printHelp(a.stdout, true)
				return exitOK
			}
			return a.usageError(nil, fmt.Sprintf("unknown command %q", rest[0]))
		}
		fmt.Fprint(a.stdout, topUsage)
		return exitOK
	case "-V", "-version", "--version":
		fmt.Fprintln(a.stdout, version())
		return exitOK
	case watchdogCommand:
		// Not a command for users: redlock starts itself so (watchdog.go).
		return a.watchdogMain()
	case execCommand:
		return a.execMain(rest)
	}
	c := commands[name]
	if c == nil {
		if strings.HasPrefix(name, "-") {
			return a.usageError(nil, fmt.Sprintf("flag %s before the command: flags come after it, as in \"redlock run --ttl 30s KEY -- COMMAND\"", name))
		}
		return a.usageError(nil, fmt.Sprintf("unknown command %q", name))
	}
	fs := c.newFlags()
	return c.define(fs)(a, fs, rest)
}

// command is one subcommand.
type command struct {
	name     string
	synopsis string // the arguments after "redlock NAME"
	help     string // what the command does: "redlock help NAME" prints it
	// summary, when set, is what --help prints instead of help, with one
	// line per flag, so that it fits a screen; "redlock help NAME" and
	// docs/cli.md have the rest.
	summary string
	exits   []exitDoc // every exit code the command returns, in order
	// define registers the command's flags and returns what runs it once
	// they are known.
	define func(fs *flagSet) action
}

// exitDoc is an exit code as --help and docs/cli.md list it.
type exitDoc struct {
	code string // "64", "COMMAND's own", "128+N"
	what string
}

// The exit codes that every command reaching the nodes may return, besides
// its own.
var (
	exitDocUsage       = exitDoc{"64", "usage error: bad flags or arguments, a former flag name"}
	exitDocNoInput     = exitDoc{"66", "a file of --tls-ca, --tls-cert or --tls-key cannot be used"}
	exitDocUnavailable = exitDoc{"69", "a majority of nodes could not be reached"}
	exitDocFailure     = exitDoc{"70", "other failure of redlock"}
	exitDocConfig      = exitDoc{"78", "misconfigured: the nodes refuse the commands for good (password,\nACL), or two URLs reach one server"}
)

// action runs a command with its raw arguments (after the command name) and
// returns the exit code.
type action func(a *app, fs *flagSet, args []string) int

var commands = map[string]*command{}

func register(c *command) *command {
	commands[c.name] = c
	return c
}

// flagSet is a command's parsed or parsable flags.
type flagSet struct {
	*flag.FlagSet
	cmd   *command
	short map[string]string // a flag's one-letter name, by its long name
}

func (c *command) newFlags() *flagSet {
	fs := flag.NewFlagSet("redlock "+c.name, flag.ContinueOnError)
	// Errors are printed by usageError, help by printHelp.
	fs.SetOutput(io.Discard)
	return &flagSet{FlagSet: fs, cmd: c}
}

func (c *command) usageLine() string {
	return "usage: redlock " + c.name + " " + c.synopsis
}

// parse parses flags wherever they appear among args (flag stops at the
// first non-flag argument; this goes on after it) and returns the other
// arguments. ok is false when redlock should exit with code.
func (fs *flagSet) parse(a *app, args []string) (positional []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.printHelp(a.stdout, false)
				return nil, exitOK, false
			}
			msg := err.Error()
			if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
				msg = "unknown flag --" + name
			} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok && renamedFlags[name] != "" {
				msg = renamedFlag{name, renamedFlags[name]}.Set("").Error()
			} else if _, tail, ok := strings.Cut(msg, ": --"); ok && strings.HasPrefix(msg, "invalid value ") && strings.Contains(tail, " is now --") {
				// The renamed flag's own message says it all.
				msg = "--" + tail
			} else {
				msg = fs.longNames(msg)
			}
			return nil, a.usageError(fs.cmd, msg), false
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, 0, true
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// longNames rewrites the flag package's "-name" in msg as "--name", the
// long name also for a flag given by its one-letter alias.
func (fs *flagSet) longNames(msg string) string {
	for _, marker := range []string{"for flag -", "needs an argument: -"} {
		head, name, ok := strings.Cut(msg, marker)
		if !ok {
			continue
		}
		name, tail, _ := strings.Cut(name, ":")
		if tail != "" {
			tail = ":" + tail
		}
		for long, short := range fs.short {
			if short == name {
				name = long
			}
		}
		return head + strings.TrimSuffix(marker, "-") + "--" + name + tail
	}
	return msg
}

// isSet reports whether the flag was given on the command line, by its
// name or its short name.
func (fs *flagSet) isSet(name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name || f.Name == fs.short[name] })
	return set
}

// printHelp prints the command's usage line, description, flags and exit
// codes: with full, as "redlock help NAME" does; else as --help does, the
// summary and one line per flag when the command has a summary.
func (fs *flagSet) printHelp(w io.Writer, full bool) {
	if !full && fs.cmd.summary != "" {
		fs.printSummary(w)
		return
	}
	fmt.Fprintf(w, "%s\n\n%s\nFlags:\n", fs.cmd.usageLine(), fs.cmd.help)
	fs.printFlags(w)
	fmt.Fprintln(w, "\nExit codes:")
	for _, e := range fs.cmd.exits {
		fmt.Fprintf(w, "  %-14s %s\n", e.code, strings.ReplaceAll(e.what, "\n", "\n"+strings.Repeat(" ", 17)))
	}
}

// printSummary prints --help's short form: the usage line, the summary,
// one line per flag, and the exit codes on a few lines.
func (fs *flagSet) printSummary(w io.Writer) {
	fmt.Fprintf(w, "%s\n\n%s\nFlags (\"redlock help %s\" explains each):\n", fs.cmd.usageLine(), fs.cmd.summary, fs.cmd.name)
	fs.VisitAll(func(f *flag.Flag) {
		if _, renamed := f.Value.(renamedFlag); renamed || fs.isAlias(f.Name) {
			return
		}
		kind, usage := flagKind(f)
		fmt.Fprintf(w, "  %-29s %s\n", fs.label(f, kind, "    "), clip(usage, 80-32))
	})
	var codes []string
	for _, e := range fs.cmd.exits {
		what, _, _ := strings.Cut(e.what, ":")
		what, _, _ = strings.Cut(what, "\n")
		what, _, _ = strings.Cut(what, " (")
		// A code stays on the line of the word after it.
		codes = append(codes, strings.ReplaceAll(e.code, " ", "\x00")+"\x00"+what)
	}
	fmt.Fprintf(w, "\nExit codes: %s.\n", strings.ReplaceAll(wrap(strings.Join(codes, "; "), 78, "  "), "\x00", " "))
}

// clip is s's first line, cut at a space to at most width runes with "…"
// where anything was left out.
func clip(s string, width int) string {
	first, rest, _ := strings.Cut(s, "\n")
	if r := []rune(first); len(r) > width {
		cut := strings.LastIndexByte(string(r[:width-1]), ' ')
		if cut <= 0 {
			cut = len(string(r[:width-1]))
		}
		return strings.TrimRight(first[:cut], ",;: ") + "…"
	}
	if rest != "" {
		return strings.TrimRight(first, ",;: ") + "…"
	}
	return first
}

// wrap breaks s into lines of at most width runes at spaces, the lines
// after the first indented by indent.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	line := 12 // "Exit codes: "
	for i, word := range strings.Fields(s) {
		if i > 0 && line+1+len([]rune(word)) > width {
			b.WriteString("\n" + indent)
			line = len(indent)
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len([]rune(word))
	}
	return b.String()
}

// label is how help shows flag f taking a value of kind ("" for none):
// its short name and its long one, or unshort and its long one.
func (fs *flagSet) label(f *flag.Flag, kind, unshort string) string {
	label := unshort + "--" + f.Name
	if short := fs.short[f.Name]; short != "" {
		label = "-" + short + ", --" + f.Name
	}
	if kind != "" {
		label += " " + kind
	}
	return label
}

// printFlags prints each flag with its usage and default.
func (fs *flagSet) printFlags(w io.Writer) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, renamed := f.Value.(renamedFlag); renamed || fs.isAlias(f.Name) {
			return
		}
		kind, usage := flagKind(f)
		line := "  " + fs.label(f, kind, "")
		fmt.Fprintln(w, line)
		fmt.Fprintf(w, "        %s", strings.ReplaceAll(usage, "\n", "\n        "))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// usageError reports bad input with the command's usage line and exits
// with exitUsage. c is nil for errors before a command was chosen.
func (a *app) usageError(c *command, msg string) int {
	if c == nil {
		fmt.Fprintf(a.stderr, "redlock: %s\nusage: redlock COMMAND [flags] [ARGS]\nRun \"redlock --help\" for the commands.\n", msg)
		return exitUsage
	}
	fmt.Fprintf(a.stderr, "redlock %s: %s\n%s\nRun \"redlock %s --help\" for more.\n", c.name, msg, c.usageLine(), c.name)
	return exitUsage
}

// errorf prints a message prefixed with the command's name.
func (a *app) errorf(c *command, format string, args ...any) {
	fmt.Fprintf(a.stderr, "redlock %s: %s\n", c.name, fmt.Sprintf(format, args...))
}

// errMsg is an error's message without the library's "redlock: " prefix:
// the command names itself already.
func errMsg(err error) string { return strings.TrimPrefix(err.Error(), "redlock: ") }

// fail reports err from the library and returns the exit code it maps to.
func (a *app) fail(c *command, what string, err error) int {
	msg := errMsg(err)
	var qe *redlock.QuorumError
	if size, asked, ok := semaphoreSize(err); ok {
		a.errorf(c, "%s: the semaphore has %s on the nodes, not %d (--slots): give --slots %d, as its other users do", what, plural(size, "permit"), asked, size)
		return exitSize
	}
	switch {
	case errors.Is(err, redlock.ErrInvalid) && errors.As(err, &qe):
		// Found at the nodes, not in the command line (two URLs that
		// reach one server): the deployment's mistake, not a usage one.
		a.errorf(c, "%s: %s", what, msg)
		return exitConfig
	case errors.Is(err, redlock.ErrInvalid):
		return a.usageError(c, msg)
	case errors.Is(err, redlock.ErrNotObtained):
		a.errorf(c, "%s: busy: %s", what, msg)
		return exitBusy
	case errors.Is(err, redlock.ErrNoQuorum):
		a.errorf(c, "%s: nodes unreachable: %s", what, msg)
		return exitUnavailable
	case errors.Is(err, redlock.ErrMisconfigured):
		// The nodes' own replies (a refused password, a missing ACL
		// permission) are in msg.
		a.errorf(c, "%s: %s", what, msg)
		return exitConfig
	}
	a.errorf(c, "%s: %s", what, msg)
	return exitFailure
}

// semaphoreSize reports whether err is a semaphore's refusal of a --slots
// other than its size, the size the nodes have and the one asked for.
func semaphoreSize(err error) (size, asked int, ok bool) {
	var se *redlock.SizeError
	if !errors.As(err, &se) {
		return 0, 0, false
	}
	return se.Size, se.Want, true
}
