package redlock_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// sourceFiles returns the package's source files (not tests), without
// their ".go", sorted.
func sourceFiles(t *testing.T) []string {
	t.Helper()
	all, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range all {
		if !strings.HasSuffix(f, "_test.go") {
			out = append(out, strings.TrimSuffix(f, ".go"))
		}
	}
	slices.Sort(out)
	return out
}

// testFileName reports whether a test file's name (without "_test.go")
// follows the rule docs/internals.md states, given the source files'
// names (without ".go").
func testFileName(name string, sources []string) bool {
	name = strings.TrimSuffix(name, "_internal")
	for _, kind := range []string{"example", "bench", "main"} {
		if name == kind || strings.HasPrefix(name, kind+"_") {
			return true
		}
	}
	if name == "export" {
		return true
	}
	if topic, ok := strings.CutPrefix(name, "package_"); ok {
		return topic != ""
	}
	// export_<source>_test.go holds the hooks of <source>.go.
	name, hooks := strings.CutPrefix(name, "export_")
	for _, s := range sources {
		if name == s || !hooks && strings.HasPrefix(name, s+"_") {
			return true
		}
	}
	return false
}

// Every test file is named after what it tests, by the rule in
// docs/internals.md.
func TestTestFileNames(t *testing.T) {
	sources := sourceFiles(t)
	tests, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tests {
		if !testFileName(strings.TrimSuffix(f, "_test.go"), sources) {
			t.Errorf("%s is named after no source file of the package, nor is it an example, benchmark, hook, helper or package test file (docs/internals.md#layout)", f)
		}
	}
	// The rule itself, on names that break it.
	for _, bad := range []string{"holds", "hung_node", "export_holds", "package", "guard_queue"} {
		if testFileName(bad, sources) {
			t.Errorf("the rule lets %s_test.go through", bad)
		}
	}
}

// docs/internals.md's table of the files in redlock/ names every source
// file of the package, and no file that is not there.
func TestInternalsFileTable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "internals.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "Inside `redlock/`, one noun per file:")
	if start < 0 {
		t.Fatal("docs/internals.md has no table of redlock/'s files")
	}
	end := strings.Index(doc[start:], "\n\n|")
	if end < 0 {
		t.Fatal("docs/internals.md: the table of redlock/'s files does not follow its heading")
	}
	rows := doc[start+end+2:]
	if stop := strings.Index(rows, "\n\n"); stop >= 0 {
		rows = rows[:stop]
	}
	// The first column's file names; names in parentheses belong to the
	// subpackage before them (internal/conn/ (`pipe.go`, ...)).
	parens := regexp.MustCompile(`\([^)]*\)`)
	name := regexp.MustCompile("`([^`/]+)\\.go`")
	var listed []string
	for row := range strings.SplitSeq(rows, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(parens.ReplaceAllString(cells[1], ""), -1) {
			listed = append(listed, m[1])
		}
	}
	slices.Sort(listed)
	sources := sourceFiles(t)
	for _, s := range sources {
		if !slices.Contains(listed, s) {
			t.Errorf("docs/internals.md's table of redlock/'s files leaves out %s.go", s)
		}
	}
	for _, l := range listed {
		if !slices.Contains(sources, l) {
			t.Errorf("docs/internals.md's table of redlock/'s files names %s.go, which redlock/ does not hold", l)
		}
	}
	if len(listed) != len(slices.Compact(slices.Clone(listed))) {
		t.Errorf("docs/internals.md's table of redlock/'s files names a file twice: %v", listed)
	}
}
