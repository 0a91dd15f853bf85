package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/redlock/redlock/doctor"
)

// Exit codes of doctor besides exitOK, exitUsage and exitUnavailable.
const (
	exitWarnings = 1 // warnings only
	exitErrors   = 2 // at least one error
)

var _ = register(&command{
	name:     "doctor",
	synopsis: "[flags]",
	help: `Check that the nodes meet the assumptions Redlock's safety rests on, and say
what to fix. For every node: that it answers and how fast, its version,
that the library's scripts may run (ACL permissions included), that no two
addresses reach one server (run_id), that it is a master outside any Redis
Cluster, what a restart does to the locks it granted (appendonly,
appendfsync, save, and the restart guard), that its maxmemory-policy cannot
evict lock keys, its clock's offset and rate against this machine's and the
other servers' (over --clock-window; beyond what the drift factor covers
for --ttl is a warning), and the restart guard's marker and quarantine. For
the whole set: the number of nodes, and whether enough of them can vote.

The table shows one row per node, a cell marked ! for a warning and !! for
an error; each problem follows, with its fix. Where the server refuses a
command (CONFIG is often renamed on managed services) the finding says what
could not be verified. Give --restart-guard when the locks use it, so that
a fresh cluster is told it needs "redlock bootstrap"; nodes that have the
guard's markers are checked for it anyway.
`,
	exits: []exitDoc{
		{"0", "all is well"},
		{"1", "warnings only"},
		{"2", "errors"},
		exitDocUsage,
		exitDocNoInput,
		{"69", "some node could not be reached (the other findings are still\nshown)"},
		exitDocFailure,
		exitDocConfig,
	},
	define: func(fs *flagSet) action {
		f := &doctorFlags{}
		f.register(fs)
		fs.BoolVar(&f.json, "json", false, "print the report as one JSON object")
		fs.durationVar(&f.window, "clock-window", doctor.DefaultClockWindow, "how long to measure the servers' clock rates over; 0 measures\nthe offsets only")
		fs.durationVar(&f.ttl, "ttl", defaultTTL, "the TTL the locks use: the clocks may differ by its drift allowance")
		fs.durationVar(&f.restartGuard, "restart-guard", 0, "the restart guard's maximum TTL, when the locks use it")
		return func(a *app, fs *flagSet, args []string) int { return a.doctor(fs, f, args) }
	},
})

type doctorFlags struct {
	nodeFlags
	json         bool
	window       time.Duration
	ttl          time.Duration
	restartGuard time.Duration
}

func (a *app) doctor(fs *flagSet, f *doctorFlags, args []string) int {
	pos, code, ok := fs.parse(a, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) > 0:
		return a.usageError(fs.cmd, fmt.Sprintf("no arguments expected, got %s", strings.Join(quoteAll(pos), " ")))
	case f.window < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--clock-window %v must not be negative", f.window))
	case f.restartGuard < 0:
		return a.usageError(fs.cmd, fmt.Sprintf("--restart-guard %v must not be negative", f.restartGuard))
	}
	clients, closeAll, code, ok := a.clients(fs, &f.nodeFlags)
	if !ok {
		return code
	}
	defer closeAll()
	rep, err := doctor.Check(context.Background(), clients,
		doctor.WithTTL(f.ttl), doctor.WithNodeTimeout(f.nodeTimeout),
		doctor.WithRestartGuard(f.restartGuard), doctor.WithClockWindow(f.window))
	if err != nil {
		return a.fail(fs.cmd, "check", err)
	}
	code = doctorCode(rep)
	if f.json {
		err = writeReportJSON(a.stdout, rep, code)
	} else {
		err = writeReport(a.stdout, rep)
	}
	if err != nil {
		a.errorf(fs.cmd, "writing the report: %v", err)
		return exitFailure
	}
	return code
}

// doctorCode is doctor's exit code for a report.
func doctorCode(rep *doctor.Report) int {
	if len(rep.Unreachable()) > 0 {
		return exitUnavailable
	}
	switch rep.Severity() {
	case doctor.Error:
		return exitErrors
	case doctor.Warning:
		return exitWarnings
	}
	return exitOK
}
