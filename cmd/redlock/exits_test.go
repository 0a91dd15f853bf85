package main

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// Every exit code a subcommand returns is in its --help (full and short)
// and in docs/cli.md's table, for that subcommand.
func TestExitCodesDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Exit codes\n")
	if !ok {
		t.Fatal("docs/cli.md has no section \"## Exit codes\"")
	}
	docs := map[string][]string{} // command → codes, in the table's order
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| code ") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			t.Fatalf("docs/cli.md: exit code row %q has %d cells, want 3", line, len(cells))
		}
		by := strings.Split(strings.ReplaceAll(cells[1], "`", ""), ", ")
		if cells[1] == "all" {
			by = nil
			for name := range commands {
				by = append(by, name)
			}
		}
		for _, name := range by {
			if commands[name] == nil {
				t.Errorf("docs/cli.md: exit code %s: no command %q", cells[0], name)
			}
			docs[name] = append(docs[name], cells[0])
		}
	}
	for name, c := range commands {
		var codes []string
		for _, e := range c.exits {
			codes = append(codes, e.code)
		}
		slices.Sort(codes)
		documented := slices.Clone(docs[name])
		slices.Sort(documented)
		if !slices.Equal(codes, documented) {
			t.Errorf("%s returns exit codes %q, docs/cli.md lists %q", name, codes, documented)
		}
		for _, full := range []bool{true, false} {
			fs := c.newFlags()
			c.define(fs)
			var help strings.Builder
			fs.printHelp(&help, full)
			_, list, ok := strings.Cut(help.String(), "Exit codes:")
			if !ok {
				t.Errorf("%s --help (full %v) has no exit codes", name, full)
				continue
			}
			for _, code := range codes {
				if !strings.Contains(list, code+" ") {
					t.Errorf("%s --help (full %v) does not list exit code %s", name, full, code)
				}
			}
		}
	}
}

// run --help fits a screen: at most 40 lines of at most 80 columns, every
// flag named; "redlock help run" has the whole page.
func TestRunHelpFitsScreen(t *testing.T) {
	t.Parallel()
	code, short, stderr := redlockRun(t, nil, "run", "--help")
	if code != 0 {
		t.Fatalf("run --help: code %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(short, "\n"), "\n")
	if len(lines) > 40 {
		t.Errorf("run --help has %d lines, want at most 40:\n%s", len(lines), short)
	}
	for _, line := range lines {
		if n := len([]rune(line)); n > 80 {
			t.Errorf("run --help: a line of %d columns: %q", n, line)
		}
	}
	_, full, _ := redlockRun(t, nil, "help", "run")
	fs := commands["run"].newFlags()
	commands["run"].define(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if _, renamed := f.Value.(renamedFlag); renamed || fs.isAlias(f.Name) {
			return
		}
		for what, help := range map[string]string{"run --help": short, "redlock help run": full} {
			if !strings.Contains(help, "--"+f.Name+" ") && !strings.Contains(help, "--"+f.Name+"\n") {
				t.Errorf("%s does not name --%s", what, f.Name)
			}
		}
	})
	if !strings.Contains(full, "watchdog process") || !strings.Contains(short, `"redlock help run"`) {
		t.Errorf("redlock help run is not the whole page, or run --help does not point to it")
	}
}

// A run --slots N against a semaphore of another size exits 65 (not 78,
// which is for credentials), saying the size the nodes have.
func TestSemaphoreSizeExit(t *testing.T) {
	t.Parallel()
	env := nodesEnv(redistest.StartT(t, 3, redistest.Options{}))
	holder := start(t, env, "run", "--slots", "3", "pool", "--", "sh", "-c", "echo held; read x; exit 0")
	holder.stdout.await(t, "held")
	code, stdout, stderr := redlockRun(t, env, "run", "--slots", "2", "pool", "--", "echo", "ran")
	if code != exitSize || stdout != "" {
		t.Errorf("run --slots 2 of a semaphore of 3: code %d, stdout %q; want %d\n%s", code, stdout, exitSize, stderr)
	}
	if want := "the semaphore has 3 permits on the nodes, not 2 (--slots): give --slots 3"; !strings.Contains(stderr, want) {
		t.Errorf("run --slots 2 of a semaphore of 3 says:\n%s\nwant %q", stderr, want)
	}
	for _, leak := range []string{"INVALID", "redlock:"} {
		if strings.Contains(stderr, leak) {
			t.Errorf("the message shows %q:\n%s", leak, stderr)
		}
	}
	holder.release()
	holder.expect(0)
}
