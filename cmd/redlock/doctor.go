package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock"
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
what to fix. The nodes are standalone masters, Redis Clusters and Sentinel
groups, as --nodes takes them; every master that casts a cluster's or a
group's vote (its shards) is checked as a standalone master is. For every
master: that it answers and how fast, its version, that the library's
scripts may run (ACL permissions included), that no two addresses reach
one server (run_id), that it is a master (outside any Redis Cluster, when
it is a standalone node), what a restart does to the locks it granted
(appendonly, appendfsync, save, and the restart guard), that its
maxmemory-policy cannot evict lock keys, its clock's offset and rate
against this machine's and the other servers' (over --clock-window; beyond
what the drift factor covers for --ttl is a warning), and the restart
guard's marker and quarantine. For a cluster: that every slot is served,
with cluster_state ok; for a Sentinel group: that its sentinels answer and
name one master, and its master's min-replicas-to-write; for both, what a
failover does to the locks. For the whole set: the number of nodes, and
whether enough of them can vote.

The table shows one row per node, with an indented row under a cluster or
group for each of its shards; a cell is marked ! for a warning and !! for
an error. Each problem follows, with its fix, named by its node (and
"shard" and the master's address). Where the server refuses a command
(CONFIG is often renamed on managed services) the finding says what could
not be verified. Give --restart-guard when the locks use it, so that a
fresh cluster is told it needs "redlock bootstrap"; nodes that have the
guard's markers are checked for it anyway.
`,
	exits: []exitDoc{
		{"0", "all is well"},
		{"1", "warnings only"},
		{"2", "errors"},
		exitDocUsage,
		exitDocNoInput,
		{"69", "some node, or a shard of a cluster or group, could not be\nreached (the other findings are still shown)"},
		exitDocFailure,
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
	nodes, code, ok := a.parsedNodes(fs, &f.nodeFlags)
	if !ok {
		return code
	}
	targets, closeAll := doctorTargets(nodes)
	defer closeAll()
	rep, err := doctor.CheckNodes(context.Background(), targets,
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

// doctorTargets makes the doctor's target of each node, and a function
// that closes the clients it made for them. The checker uses only their
// options: it connects to the servers with clients of its own.
func doctorTargets(nodes []redlock.NodeURL) (targets []doctor.Target, closeAll func()) {
	targets = make([]doctor.Target, len(nodes))
	var closers []io.Closer
	for i, u := range nodes {
		switch {
		case u.Server != nil:
			c := redis.NewClient(u.Server)
			targets[i], closers = doctor.Server(c), append(closers, c)
		case u.Cluster != nil:
			c := redis.NewClusterClient(u.Cluster)
			targets[i], closers = doctor.Cluster(c), append(closers, c)
		case u.Sentinel != nil:
			targets[i] = doctor.Sentinel(u.Sentinel)
		}
	}
	return targets, func() {
		for _, c := range closers {
			// Nothing was sent on them: closing cannot lose anything.
			_ = c.Close()
		}
	}
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
