// Command codecheck holds the checks of `make lint` that go vet,
// staticcheck and goimports do not make:
//
//	codecheck imports [-w] FILE...
//
// reports the files whose import blocks are not grouped standard library,
// then third party, then this repository's packages (each group once, in
// that order, apart by a blank line); -w regroups them instead, keeping
// each import's comments and the order within each group (goimports -local
// sorts the groups after it).
//
//	codecheck asserts FILE...
//
// reports the Test functions in FILE (the _test.go files among them) that
// cannot fail: that never call t.Error, t.Errorf, t.Fatal, t.Fatalf,
// t.Fail, t.FailNow, t.Skip, t.Skipf or t.SkipNow, nor pass t on to a
// helper (a function that takes the *testing.T), nor run subtests that do.
// The exceptions below are the tests allowed to do without, each with the
// reason.
//
//	codecheck funcs FILE...
//
// reports the functions and methods of FILE (past the _test.go files among
// them) longer than 60 lines, from "func" to the closing brace, or with
// more than 6 parameters (the receiver is not counted). `make lint` runs it
// on the library: redlock/ and its subpackages, quorum/ and clock/.
//
// Each exits with status 1 when it reports something, 2 on bad usage or a
// file it cannot read or parse.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
)

// module is the import path prefix of this repository's packages.
const module = "github.com/quorumlock/redlock"

// exceptions are tests that assert nothing on purpose, by file (slash
// separated, from the repository's root) and name, with the reason.
var exceptions = map[string]string{}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var (
		found int
		err   error
	)
	switch os.Args[1] {
	case "imports":
		fs := flag.NewFlagSet("imports", flag.ExitOnError)
		write := fs.Bool("w", false, "regroup the files instead of reporting them")
		_ = fs.Parse(os.Args[2:]) // ExitOnError: Parse exits on a bad flag
		found, err = checkImports(fs.Args(), *write)
	case "asserts":
		found, err = checkAsserts(os.Args[2:])
	case "funcs":
		found, err = checkFuncs(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "codecheck:", err)
		os.Exit(2)
	}
	if found > 0 {
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: codecheck imports [-w] FILE... | codecheck asserts FILE... | codecheck funcs FILE...")
	os.Exit(2)
}

// checkImports reports (or with write, regroups) the files whose import
// blocks are out of order, and returns how many it reported.
func checkImports(files []string, write bool) (int, error) {
	found := 0
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			return found, err
		}
		out, err := Regroup(src)
		if err != nil {
			return found, fmt.Errorf("%s: %w", name, err)
		}
		if bytes.Equal(src, out) {
			continue
		}
		if write {
			if err := os.WriteFile(name, out, 0o644); err != nil {
				return found, err
			}
			continue
		}
		fmt.Printf("%s: imports not grouped standard library / third party / %s\n", name, module)
		found++
	}
	return found, nil
}

// Regroup returns src with the specs of each parenthesized import block
// grouped standard library, third party, this module, apart by a blank
// line; a spec keeps the comment lines just above it and its order within
// its group. Source whose blocks are grouped so already comes back as it
// was.
func Regroup(src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	lines := strings.SplitAfter(string(src), "\n")
	// Blocks from the last, so that earlier line numbers stay put.
	for i := len(f.Decls) - 1; i >= 0; i-- {
		d, ok := f.Decls[i].(*ast.GenDecl)
		if !ok || d.Tok != token.IMPORT || !d.Lparen.IsValid() {
			continue
		}
		first := fset.Position(d.Lparen).Line // the line of "import ("
		last := fset.Position(d.Rparen).Line  // the line of ")"
		body, err := regroupBlock(lines[first : last-1])
		if err != nil {
			return nil, err
		}
		lines = append(lines[:first], append(body, lines[last-1:]...)...)
	}
	return []byte(strings.Join(lines, "")), nil
}

// regroupBlock regroups the lines between "import (" and ")".
func regroupBlock(block []string) ([]string, error) {
	var groups [3][][]string // by class: the specs, each with its comment lines
	var pending []string     // comment lines waiting for their spec
	for _, line := range block {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			continue
		case strings.HasPrefix(trimmed, "//"):
			pending = append(pending, line)
			continue
		}
		path, err := specPath(trimmed)
		if err != nil {
			return nil, err
		}
		c := class(path)
		groups[c] = append(groups[c], append(pending, line))
		pending = nil
	}
	if len(pending) > 0 {
		return nil, errors.New("a comment after the last import: regroup by hand")
	}
	var out []string
	for _, g := range groups {
		if len(g) == 0 {
			continue
		}
		if len(out) > 0 {
			out = append(out, "\n")
		}
		for _, spec := range g {
			out = append(out, spec...)
		}
	}
	return out, nil
}

// specPath returns the import path of one import spec's line.
func specPath(line string) (string, error) {
	i := strings.IndexByte(line, '"')
	j := -1
	if i >= 0 {
		j = strings.IndexByte(line[i+1:], '"')
	}
	if j < 0 {
		return "", fmt.Errorf("import line %q: one spec per line, please", line)
	}
	return strconv.Unquote(line[i : i+j+2])
}

// class sorts an import path: 0 standard library, 1 third party, 2 this
// repository.
func class(path string) int {
	switch {
	case path == module || strings.HasPrefix(path, module+"/"):
		return 2
	case strings.Contains(strings.SplitN(path, "/", 2)[0], "."):
		return 1
	default:
		return 0
	}
}
