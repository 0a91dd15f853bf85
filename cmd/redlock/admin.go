package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock/redlock"
)

// The admin commands call the library with context.Background(): each is
// one round whose node calls are bounded by --node-timeout, and a context
// cancelled as the call returns would cut off the nodes that are still
// answering (a round returns once its outcome is decided).

var _ = register(&command{
	name:     "inspect",
	synopsis: "[flags] KEY",
	help: `Show what each node holds for the lock KEY: the holder's token, the metadata
stored with it, how many times it is held (re-entry) and its remaining TTL,
or the node's error; and which token, if any, holds a majority. With
--slots N, the same for each permit of the semaphore KEY of N; with
--shared, for the writer and each reader of the read-write lock KEY.
`,
	exits: []exitDoc{
		{"0", "a majority of nodes answered (whether or not the lock is held)"},
		exitDocUsage,
		exitDocNoInput,
		{"69", "fewer than a majority of nodes answered (the table shows what\nthe others said)"},
		exitDocFailure,
		exitDocConfig,
	},
	define: func(fs *flagSet) action {
		f := &inspectFlags{}
		f.register(fs)
		fs.BoolVar(&f.json, "json", false, "print the status as one JSON object")
		fs.IntVar(&f.slots, "slots", 0, "show the permits of the semaphore KEY of N, as taken by run --slots N")
		fs.BoolVar(&f.shared, "shared", false, "show the writer and the readers of the read-write lock KEY, as taken by run --shared")
		return func(a *app, fs *flagSet, args []string) int { return a.inspect(fs, f, args) }
	},
})

var _ = register(&command{
	name:     "release",
	synopsis: "--force --yes [flags] KEY",
	help: `Remove the lock KEY on every node, whoever holds it, and wake those waiting
for it: the way out of a lock whose owner is gone. A live owner is not told;
its next extension finds the lock lost, and "redlock run" then stops its
command. --force is required, as a reminder of that; without --yes the
current holder is shown and nothing is removed.
`,
	exits: []exitDoc{
		{"0", "removed on a majority of nodes"},
		{"1", "not removed: no --yes (the holder was shown)"},
		exitDocUsage,
		exitDocNoInput,
		exitDocUnavailable,
		exitDocFailure,
		exitDocConfig,
	},
	define: func(fs *flagSet) action {
		f := &releaseFlags{}
		f.register(fs)
		fs.BoolVar(&f.force, "force", false, "remove the lock whoever holds it (required)")
		fs.BoolVar(&f.yes, "yes", false, "confirm the removal")
		return func(a *app, fs *flagSet, args []string) int { return a.forceRelease(fs, f, args) }
	},
})

// exitNotRemoved is release's exit code without --yes: nothing was removed,
// as asked.
const exitNotRemoved = 1

type inspectFlags struct {
	nodeFlags
	json   bool
	slots  int
	shared bool
}

type releaseFlags struct {
	nodeFlags
	force, yes bool
}

// oneKey returns the single KEY argument of inspect and release.
func (a *app) oneKey(fs *flagSet, args []string) (key string, code int, ok bool) {
	pos, code, ok := fs.parse(a, args)
	switch {
	case !ok:
		return "", code, false
	case len(pos) == 0:
		return "", a.usageError(fs.cmd, "missing KEY"), false
	case len(pos) > 1:
		return "", a.usageError(fs.cmd, fmt.Sprintf("one KEY expected, got %d arguments (%s)", len(pos), strings.Join(quoteAll(pos), " "))), false
	case pos[0] == "":
		return "", a.usageError(fs.cmd, "empty KEY"), false
	}
	return pos[0], 0, true
}

func (a *app) inspect(fs *flagSet, f *inspectFlags, args []string) int {
	key, code, ok := a.oneKey(fs, args)
	if !ok {
		return code
	}
	if msg := f.badKind(); msg != "" {
		return a.usageError(fs.cmd, msg)
	}
	l, closeAll, code, ok := a.locker(fs, &f.nodeFlags)
	if !ok {
		return code
	}
	defer closeAll()
	if f.slots != 0 || f.shared {
		return a.inspectMany(fs, f, l, key)
	}
	ctx := context.Background()
	st, err := l.Inspect(ctx, key)
	if err == nil && !f.json && !anyHeld(st) {
		// Free as a lock: KEY may name a read-write lock with readers
		// only, or a semaphore, whose keys are others.
		if code, shown := a.inspectOtherKinds(fs, f, l, key); shown {
			return code
		}
	}
	if st != nil {
		var werr error
		if f.json {
			werr = writeStatusJSON(a.stdout, st, l.Quorum())
		} else {
			werr = writeStatus(a.stdout, "lock "+strconv.Quote(st.Key), st, l.Quorum())
		}
		if werr != nil {
			a.errorf(fs.cmd, "writing the status: %v", werr)
			return exitFailure
		}
	}
	if err != nil {
		return a.fail(fs.cmd, fmt.Sprintf("inspect %q", key), err)
	}
	return exitOK
}

// writeStatus prints a status as a summary line and a table, one row per
// node.
func writeStatus(w io.Writer, title string, st *redlock.Status, need int) error {
	held := 0
	for _, n := range st.Nodes {
		if n.Held && n.Token == st.Holder {
			held++
		}
	}
	var summary string
	switch {
	case st.Holder != "":
		summary = fmt.Sprintf("held by %s on %d of %d nodes (%d needed)", st.Holder, held, len(st.Nodes), need)
	default:
		summary = fmt.Sprintf("not held by any owner on a majority (%d of %d nodes needed)", need, len(st.Nodes))
	}
	if _, err := fmt.Fprintf(w, "%s: %s\n\n", title, summary); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tTTL\tHOLDS\tFENCE\tTOKEN\tMETADATA")
	for _, n := range st.Nodes {
		fence := "-"
		if n.Fence > 0 {
			fence = strconv.FormatUint(n.Fence, 10)
		}
		switch {
		case n.Err != nil:
			fmt.Fprintf(tw, "%s\terror\t-\t-\t-\t-\t%s\n", n.Addr, printable(errMsg(n.Err)))
		case !n.Held:
			fmt.Fprintf(tw, "%s\tfree\t-\t-\t%s\t-\t-\n", n.Addr, fence)
		default:
			ttl := "none"
			if n.TTL >= 0 {
				ttl = n.TTL.Round(time.Millisecond).String()
			}
			meta := printable(n.Metadata)
			if meta == "" {
				meta = "-"
			}
			fmt.Fprintf(tw, "%s\theld\t%s\t%d\t%s\t%s\t%s\n", n.Addr, ttl, n.Holds, fence, printable(n.Token), meta)
		}
	}
	return tw.Flush()
}

// statusJSON is the --json form of a status.
type statusJSON struct {
	Key    string     `json:"key"`
	Holder string     `json:"holder"`
	Quorum int        `json:"quorum"`
	Nodes  []nodeJSON `json:"nodes"`
}

type nodeJSON struct {
	Addr     string `json:"addr"`
	Held     bool   `json:"held"`
	Token    string `json:"token,omitempty"`
	Metadata string `json:"metadata,omitempty"`
	Holds    int    `json:"holds,omitempty"`
	// Fence is the node's fencing counter for the key (0: none).
	Fence uint64 `json:"fence,omitempty"`
	// TTLMs is the remaining TTL in milliseconds, -1 without expiry.
	TTLMs int64  `json:"ttl_ms,omitempty"`
	Error string `json:"error,omitempty"`
}

func writeStatusJSON(w io.Writer, st *redlock.Status, need int) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(toJSON(st, need))
}

func toJSON(st *redlock.Status, need int) statusJSON {
	out := statusJSON{Key: st.Key, Holder: st.Holder, Quorum: need, Nodes: make([]nodeJSON, len(st.Nodes))}
	for i, n := range st.Nodes {
		nj := nodeJSON{Addr: n.Addr, Held: n.Held, Token: n.Token, Metadata: n.Metadata, Holds: n.Holds, Fence: n.Fence}
		if n.Held {
			nj.TTLMs = n.TTL.Milliseconds()
			if n.TTL < 0 {
				nj.TTLMs = -1
			}
		}
		if n.Err != nil {
			nj.Error = n.Err.Error()
		}
		out.Nodes[i] = nj
	}
	return out
}

// printable quotes s when it holds characters that would garble a table.
func printable(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

func (a *app) forceRelease(fs *flagSet, f *releaseFlags, args []string) int {
	key, code, ok := a.oneKey(fs, args)
	if !ok {
		return code
	}
	if !f.force {
		return a.usageError(fs.cmd, "--force is required: this removes the lock whoever holds it (an owner releases its own lock by ending its command)")
	}
	l, closeAll, code, ok := a.locker(fs, &f.nodeFlags)
	if !ok {
		return code
	}
	defer closeAll()
	ctx := context.Background()
	if !f.yes {
		st, err := l.Inspect(ctx, key)
		if st != nil {
			if werr := writeStatus(a.stderr, "lock "+strconv.Quote(st.Key), st, l.Quorum()); werr != nil {
				a.errorf(fs.cmd, "writing the status: %v", werr)
			}
		}
		if err != nil {
			return a.fail(fs.cmd, fmt.Sprintf("inspect %q", key), err)
		}
		// Not a usage error: the command line was right, and this is what
		// it asks for (a look before removing). It is not a success
		// either: nothing was removed.
		a.errorf(fs.cmd, "not removing %q without --yes: the holder is shown above; give --yes to remove the lock", key)
		return exitNotRemoved
	}
	if err := l.ForceRelease(ctx, key); err != nil {
		return a.fail(fs.cmd, fmt.Sprintf("release %q", key), err)
	}
	fmt.Fprintf(a.stdout, "removed lock %s\n", strconv.Quote(key))
	return exitOK
}

var _ = register(&command{
	name:     "bootstrap",
	synopsis: "[flags]",
	help: `Seed the restart guard's marker on every node of a fresh cluster, so that the
nodes vote at once instead of abstaining for the guard's maximum TTL (see
"redlock run --restart-guard"). A node that has its marker already is left
as it is. A node whose marker was set before it restarted, reloaded older
data, was promoted from replica or evicted keys has lost its memory: it is
not seeded but reported (exit 69), and abstains at its first guarded use. A
node whose maxmemory-policy may evict keys is reported too.

Run it once, when the cluster is first set up. Never run it on a cluster
whose nodes may have lost locks that are still held (a node restarted
without persistence less than the maximum TTL ago): that node would vote
again at once, which is what the guard prevents.

The way out of a first-use mistake (a guarded run before bootstrap, which
makes every node abstain for the guard's maximum TTL): --clear-quarantine
states that no lock is held. It searches every node for lock keys first and
is refused (exit 75) while any exists; then it ends the quarantines and
seeds the markers. A node that really lost its memory then votes at once:
use it only when no lock can be held.
`,
	exits: []exitDoc{
		{"0", "every node has its marker"},
		exitDocUsage,
		exitDocNoInput,
		{"69", "some node could not be reached (run it again when it can), or\nabstains: it lost its memory"},
		exitDocFailure,
		{"75", "with --clear-quarantine: a lock key exists on some node"},
		exitDocConfig,
	},
	define: func(fs *flagSet) action {
		var n nodeFlags
		n.register(fs)
		var clear bool
		fs.BoolVar(&clear, "clear-quarantine", false, "end the quarantines of a first-use mistake; refused while any lock key exists")
		return func(a *app, fs *flagSet, args []string) int { return a.bootstrap(fs, &n, args, &clear) }
	},
})

// clearQuarantineHint is what bootstrap says when nodes abstain: the way
// out, and when it is safe.
const clearQuarantineHint = "if no lock can be held now (a guarded run before the first bootstrap, say), " +
	"\"redlock bootstrap --clear-quarantine\" ends the quarantine; it is refused while any lock key exists. " +
	"If a node restarted without its data while locks were held, do not: wait out the guard's maximum TTL, after which it votes again"

func (a *app) bootstrap(fs *flagSet, n *nodeFlags, args []string, clear *bool) int {
	pos, code, ok := fs.parse(a, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return a.usageError(fs.cmd, fmt.Sprintf("no arguments expected, got %s", strings.Join(quoteAll(pos), " ")))
	}
	l, closeAll, code, ok := a.locker(fs, n)
	if !ok {
		return code
	}
	defer closeAll()
	ctx := context.Background()
	var opts []redlock.BootstrapOption
	if *clear {
		opts = append(opts, redlock.ClearQuarantine())
	}
	if err := l.Bootstrap(ctx, opts...); err != nil {
		if *clear && errors.Is(err, redlock.ErrInvalid) {
			// A lock key exists: not a usage error, and it may be gone
			// when the lock is released.
			a.errorf(fs.cmd, "bootstrap: %s", errMsg(err))
			return exitBusy
		}
		var qe *redlock.QuorumError
		if !errors.Is(err, redlock.ErrNoQuorum) || !errors.As(err, &qe) {
			return a.fail(fs.cmd, "bootstrap", err)
		}
		// Not all "unreachable": a node that abstains answered, and
		// lost its memory.
		var abstain, unreachable int
		for _, n := range qe.Nodes {
			switch {
			case n.Err == nil:
			case errors.Is(n.Err, redlock.ErrAbstained):
				abstain++
			default:
				unreachable++
			}
		}
		var parts []string
		if abstain > 0 {
			verb := " abstain"
			if abstain == 1 {
				verb = " abstains"
			}
			parts = append(parts, plural(abstain, "node")+verb+" (lost its memory: not seeded)")
		}
		if unreachable > 0 {
			parts = append(parts, plural(unreachable, "node")+" unreachable"+" (run bootstrap again when it can be reached)")
		}
		if len(parts) == 0 {
			parts = append(parts, "not every node has its marker")
		}
		a.errorf(fs.cmd, "%s: %s", strings.Join(parts, ", "), errMsg(err))
		if abstain > 0 {
			fmt.Fprintf(a.stderr, "redlock %s: %s\n", fs.cmd.name, clearQuarantineHint)
		}
		return exitUnavailable
	}
	fmt.Fprintf(a.stdout, "restart-guard markers in place on all %d nodes\n", len(l.Nodes()))
	return exitOK
}
