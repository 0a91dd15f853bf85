package main

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/redlock"
)

const readmePath = "../../README.md"

// readmeSection returns the README's section under heading (a whole line,
// "## Quick start"), up to the next heading of the same or a higher level.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no heading %q", heading)
	}
	level := strings.IndexByte(heading, ' ')
	lines := strings.SplitAfter(rest, "\n")
	fenced := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if l := len(line) - len(strings.TrimLeft(line, "#")); !fenced && l > 0 && l <= level && strings.HasPrefix(line[l:], " ") {
			return strings.Join(lines[:i], "")
		}
	}
	return rest
}

// readmeBlock returns the first fenced block of language lang in the
// README's section under heading, with its final newline.
func readmeBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	_, rest, ok := strings.Cut(readmeSection(t, heading), "\n```"+lang+"\n")
	if !ok {
		t.Fatalf("README section %q has no ```%s block", heading, lang)
	}
	block, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		t.Fatalf("README section %q: the ```%s block does not end", heading, lang)
	}
	return block + "\n"
}

// The README's quick start is this program, byte for byte.
func TestReadmeQuickStart(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if got := readmeBlock(t, "## Quick start", "go"); got != string(src) {
		t.Errorf("the README's quick start differs from examples/quickstart/main.go: copy main.go into the README's ```go block under \"## Quick start\"")
	}
}

// api lists the names of the redlock package and, prefixed "doctor.", of
// its doctor package: "Name" for functions, types, constants and
// variables, "Type.Method" for methods, each with its parameter names
// ("opts..." for a variadic one); nil for names that are not functions.
func api(t *testing.T) map[string][]string {
	t.Helper()
	names := map[string][]string{}
	pkgNames(t, "../../redlock", "github.com/quorumlock/redlock/redlock", "", names)
	pkgNames(t, "../../redlock/doctor", "github.com/quorumlock/redlock/redlock/doctor", "doctor.", names)
	return names
}

// pkgNames adds the names of the package in dir to names, as api lists
// them, each with prefix.
func pkgNames(t *testing.T, dir, importPath, prefix string, names map[string][]string) {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(dir + "/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, importPath)
	if err != nil {
		t.Fatal(err)
	}
	addFunc := func(name string, f *doc.Func) {
		params := []string{}
		for _, field := range f.Decl.Type.Params.List {
			for _, n := range field.Names {
				if _, ok := field.Type.(*ast.Ellipsis); ok {
					params = append(params, n.Name+"...")
				} else {
					params = append(params, n.Name)
				}
			}
		}
		names[prefix+name] = params
	}
	addValues := func(values []*doc.Value) {
		for _, v := range values {
			for _, n := range v.Names {
				names[prefix+n] = nil
			}
		}
	}
	addValues(pkg.Consts)
	addValues(pkg.Vars)
	for _, f := range pkg.Funcs {
		addFunc(f.Name, f)
	}
	for _, typ := range pkg.Types {
		names[prefix+typ.Name] = nil
		addValues(typ.Consts)
		addValues(typ.Vars)
		for _, f := range typ.Funcs {
			addFunc(f.Name, f)
		}
		for _, m := range typ.Methods {
			addFunc(typ.Name+"."+m.Name, m)
		}
	}
}

// A name in code: Name, Type.Name, or either with its parameters, each
// with "doctor." in front for the doctor package's.
var apiName = regexp.MustCompile(`^((?:doctor\.)?(?:[A-Z][A-Za-z]*\.)?)([A-Z][A-Za-z]*)(\(([^()]*)\))?$`)

// A span of code in Markdown.
var codeSpan = regexp.MustCompile("`([^`]*)`")

// checkNames checks every name in backquotes in cell against the package:
// it exists, and where parameters are given they are the function's, all of
// them, in order. It returns how many names it checked.
func checkNames(t *testing.T, names map[string][]string, cell string) int {
	t.Helper()
	n := 0
	for _, span := range codeSpan.FindAllStringSubmatch(cell, -1) {
		m := apiName.FindStringSubmatch(span[1])
		if m == nil {
			continue
		}
		name := m[1] + m[2]
		params, ok := names[name]
		if !ok && m[1] == "" {
			// A bare method name: any type's method will do.
			for full, p := range names {
				if strings.HasSuffix(full, "."+name) {
					params, ok = p, true
				}
			}
		}
		n++
		if !ok {
			t.Errorf("%s: the package has no %s", span[0], name)
			continue
		}
		if m[3] == "" {
			continue
		}
		if params == nil {
			t.Errorf("%s: %s is not a function", span[0], name)
			continue
		}
		var given []string
		if m[4] != "" {
			given = strings.Split(m[4], ", ")
		}
		if !slices.Equal(given, params) {
			t.Errorf("%s: the parameters are (%s)", span[0], strings.Join(params, ", "))
		}
	}
	return n
}

// tableRows returns the cells of the table rows of a README section, after
// the header and separator rows.
func tableRows(section string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| |") {
			continue
		}
		rows = append(rows, strings.Split(strings.Trim(line, "|"), " | "))
	}
	return rows
}

// Every name in the API table exists in the package, and every name given
// with its parameters has exactly those.
func TestReadmeAPI(t *testing.T) {
	names := api(t)
	checked := 0
	for _, row := range tableRows(readmeSection(t, "### API at a glance")) {
		before := checked
		checked += checkNames(t, names, row[0])
		if checked == before {
			t.Errorf("row %q names nothing the test can check", row[0])
		}
	}
	if checked < 30 {
		t.Errorf("checked only %d names: is the table still there?", checked)
	}
}

// The defaults table's library column names real options and constants,
// and gives their values.
func TestReadmeDefaults(t *testing.T) {
	names := api(t)
	rows := map[string][]string{}
	for _, row := range tableRows(readmeSection(t, "### Defaults, and when to change them")) {
		if len(row) != 4 {
			t.Fatalf("row %q has %d cells, want 4", row, len(row))
		}
		checkNames(t, names, row[1])
		rows[strings.TrimSpace(row[0])] = row
	}
	for setting, want := range map[string]string{
		"TTL":          redlock.DefaultTTL.String(),
		"node timeout": redlock.DefaultNodeTimeout.String(),
		"clock drift":  fmt.Sprintf("%g%% of the TTL", redlock.DefaultDriftFactor*100),
	} {
		if row, ok := rows[setting]; !ok {
			t.Errorf("no row %q", setting)
		} else if !strings.Contains(row[1], want) {
			t.Errorf("%s: the library's default is %s, the README says %q", setting, want, row[1])
		}
	}
}
