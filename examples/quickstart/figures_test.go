package main

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redlock"
	"github.com/quorumlock/redlock/redlock/doctor"
)

// A figure a document states about the code: the document says Says (with
// any spacing and line breaks), and the code's Name, in the Go files of
// Dir, is Expr. Name is a constant or variable, or, as "flag:NAME", the
// default of the flag NAME. Change one and the test names the other.
type figure struct {
	Doc, Says string
	Dir, Name string
	Expr      string
}

var figures = []figure{
	{"README.md", "`make bench` starts seven local redis-server processes", "bench/internal/harness", "LocalNodes", "7"},
	{"docs/benchmarks.md", "starts seven local redis-server processes itself", "bench/internal/harness", "LocalNodes", "7"},
	{"docs/benchmarks.md", "on seven local servers", "bench/internal/harness", "LocalNodes", "7"},
	{"docs/benchmarks.md", "runs plain redlock (default options) over three standalone servers", "bench/internal/harness", "ClusterNodes", "3"},
	{"CONTRIBUTING.md", "seven local servers", "bench/internal/harness", "LocalNodes", "7"},
	{"docs/internals.md", "two queues, each served by one long-lived worker", "redlock/internal/conn", "WorkersPerNode", "2"},
	{"docs/internals.md", "`New` starts two per node", "redlock/internal/conn", "WorkersPerNode", "2"},
	{"docs/benchmarks.md", "Each node's calls go out on two connections", "redlock/internal/conn", "WorkersPerNode", "2"},
	{"docs/internals.md", "up to 64 calls, and sends it as one pipeline", "redlock/internal/conn", "maxBatch", "64"},
	{"docs/deployment.md", "or meets a replica, and every second", "redlock/internal/conn", "watchEvery", "time.Second"},
	{"docs/internals.md", "A queue holds at most 2,048 calls", "redlock/internal/conn", "queueLen", "2048"},
	{"docs/internals.md", "up to 128 keys in one script call per node", "redlock", "extendChunk", "128"},
	{"docs/internals.md", "at most 2,048 keys in rounds at once", "redlock", "maxInFlight", "16 * extendChunk"},
	{"docs/safety.md", "After 8 handoffs in a row", "redlock", "maxHandoffs", "8"},
	{"docs/safety.md", "A counter expires 5 minutes plus the lock's TTL", "redlock", "defaultFenceLifetime", "5 * time.Minute"},
	{"docs/safety.md", "TTL/20 (at least 5 ms)", "redlock", "minWarnMargin", "5 * time.Millisecond"},
	{"docs/safety.md", "its own clock 10 ms back,", "redlock", "fenceStartLag", "10 * time.Millisecond"},
	{"docs/safety.md", "rounded down to the servers' 100 ms grid", "redlock", "fenceStartStep", "100_000"},
	{"README.md", "30s (`--ttl`); `elect`: 10s", "cmd/redlock", "defaultTTL", "30 * time.Second"},
	{"README.md", "30s (`--ttl`); `elect`: 10s", "cmd/redlock", "defaultElectTTL", "10 * time.Second"},
	{"README.md", "500ms (`--node-timeout`)", "cmd/redlock", "defaultNodeTimeout", "500 * time.Millisecond"},
	{"README.md", "jittered backoff from 8ms to 512ms", "redlock", "DefaultRetry", "ExponentialBackoff(8*time.Millisecond, 512*time.Millisecond)"},
	{"docs/chaos.md", "a real five-node cluster", "integration/chaos", "Nodes", "5"},
	{"docs/chaos.md", "`-chaos.duration` (per backend, shared among the scenarios, default 9s", "integration/internal/flags", "flag:chaos.duration", "9 * time.Second"},
	{"docs/chaos.md", "`-chaos.ttl` (default 500ms", "integration/internal/flags", "flag:chaos.ttl", "500 * time.Millisecond"},
	{"docs/chaos.md", "`-chaos.maxhold` (default 150ms)", "integration/internal/flags", "flag:chaos.maxhold", "150 * time.Millisecond"},
	{"docs/chaos.md", "`-chaos.clients` (default 4)", "integration/internal/flags", "flag:chaos.clients", "4"},
	{"docs/chaos.md", "`-chaos.goroutines` (default 4 per client", "integration/internal/flags", "flag:chaos.goroutines", "4"},
	{"docs/chaos.md", "`-chaos.processes` (client processes, default 2)", "integration/internal/flags", "flag:chaos.processes", "2"},
	{"docs/chaos.md", "Four lockers in the test process and two client processes", "integration/internal/flags", "flag:chaos.clients", "4"},
	{"docs/chaos.md", "contend on three keys with 500 ms locks", "integration/internal/flags", "flag:chaos.keys", "3"},
}

// The figures the documents state about the code are the code's.
func TestDocFigures(t *testing.T) {
	for _, f := range figures {
		if !docSays(t, f.Doc, f.Says) {
			t.Errorf("%s no longer says %q: the code's %s in %s is %s; update the figure in the document and here", f.Doc, f.Says, f.Name, f.Dir, f.Expr)
		}
		if got := codeExpr(t, f.Dir, f.Name); got != f.Expr {
			t.Errorf("%s in %s is %s, not %s: %s says %q; update it, and this test", f.Name, f.Dir, got, f.Expr, f.Doc, f.Says)
		}
	}
}

// The figures stated about exported names, checked against their values.
func TestDocExportedFigures(t *testing.T) {
	for _, f := range []struct{ doc, says, value, want string }{
		{"docs/safety.md", "At most `MaxMultiKeys` (64) keys", strconv.Itoa(redlock.MaxMultiKeys), "64"},
		{"docs/safety.md", "`redlock.MaxKeyLen` (4096 bytes)", strconv.Itoa(redlock.MaxKeyLen), "4096"},
		{"docs/safety.md", "`ObservePoll` (1 s)", redlock.ObservePoll.String(), time.Second.String()},
		{"docs/safety.md", "(`WithClockWindow`, default 3s)", doctor.DefaultClockWindow.String(), "3s"},
		{"docs/safety.md", "starts with `redlock:` (`redlock.ReservedPrefix`)", redlock.ReservedPrefix, "redlock:"},
		{"README.md", "(1% of the TTL plus 2 ms)", strconv.FormatFloat(redlock.DefaultDriftFactor*100, 'g', -1, 64) + "%", "1%"},
		{"docs/safety.md", "a drift margin (1% of the TTL plus 2 ms)", strconv.FormatFloat(redlock.DefaultDriftFactor*100, 'g', -1, 64) + "%", "1%"},
	} {
		if !docSays(t, f.doc, f.says) {
			t.Errorf("%s no longer says %q", f.doc, f.says)
		}
		if f.value != f.want {
			t.Errorf("%s says %q, but the value is %s", f.doc, f.says, f.value)
		}
	}
}

// The compose file starts the five masters the README's quick start and
// the docs name, on ports 7001-7005 unless REDLOCK_PORT1 to REDLOCK_PORT5
// say otherwise.
func TestDocComposeNodes(t *testing.T) {
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		n := strconv.Itoa(i)
		if !strings.Contains(string(b), `ports: ["${REDLOCK_PORT`+n+`:-700`+n+`}:6379"]`) {
			t.Errorf("docker-compose.yml has no node on port REDLOCK_PORT%d, 700%d by default", i, i)
		}
	}
	if n := strings.Count(string(b), `ports: [`); n != 5 {
		t.Errorf("docker-compose.yml has %d nodes, the docs say five", n)
	}
	for _, doc := range []string{"README.md", "docs/internals.md"} {
		if !docSays(t, doc, "five Redis") || !docSays(t, doc, "7001") || !docSays(t, doc, "REDLOCK_PORT1") {
			t.Errorf("%s no longer names the compose file's five nodes on ports 7001-7005 and their variables", doc)
		}
	}
}

// docSays reports whether the repository's file doc contains says, both
// with their runs of white space made one space.
func docSays(t *testing.T, doc, says string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", doc))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(strings.Join(strings.Fields(string(b)), " "), strings.Join(strings.Fields(says), " "))
}

// codeExpr returns the source of name's value in the Go files (not tests)
// of the repository's directory dir: a constant or variable, or with the
// prefix "flag:", the default of the flag of that name.
func codeExpr(t *testing.T, dir, name string) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("../..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	flagName, isFlag := strings.CutPrefix(name, "flag:")
	var found ast.Expr
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if !isFlag && id.Name == name && i < len(n.Values) {
						found = n.Values[i]
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && isFlag && len(n.Args) >= 2 {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "flag" {
						if lit, ok := n.Args[0].(*ast.BasicLit); ok && lit.Value == strconv.Quote(flagName) {
							found = n.Args[1]
						}
					}
				}
			}
			return true
		})
	}
	if found == nil {
		t.Fatalf("no %s in %s", name, dir)
	}
	var b strings.Builder
	if err := printer.Fprint(&b, fset, found); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Every number in the README's benchmark table comes from the run that
// docs/benchmarks.md shows.
func TestReadmeBenchmarkFigures(t *testing.T) {
	b, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	run := string(b)
	number := regexp.MustCompile(`\d+(\.\d+)?`)
	checked := 0
	for _, row := range tableRows(readmeSection(t, "## Benchmarks")) {
		for _, n := range number.FindAllString(strings.Join(row, " "), -1) {
			checked++
			if !regexp.MustCompile(`(^|[^\d.])` + regexp.QuoteMeta(n) + `([^\d.]|$)`).MatchString(run) {
				t.Errorf("the README's benchmark table says %s (row %q): docs/benchmarks.md's run has no such figure", n, strings.Join(row, " | "))
			}
		}
	}
	if checked < 30 {
		t.Errorf("checked only %d figures: is the table still there?", checked)
	}
}
