package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
)

// The limits of a library function: its lines, from "func" to its closing
// brace, and its parameters (the receiver is not one; each name of a
// parameter list counts, and so does an unnamed parameter).
const (
	maxFuncLines  = 60
	maxFuncParams = 6
)

// checkFuncs reports the functions and methods of files (past the
// _test.go files among them) that are longer than maxFuncLines or take
// more than maxFuncParams parameters, and returns how many it reported.
func checkFuncs(files []string) (int, error) {
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return found, err
		}
		for _, o := range Oversized(fset, f) {
			fmt.Printf("%s: %s\n", fset.Position(o.Func.Pos()), o)
			found++
		}
	}
	return found, nil
}

// Oversize is a function over one of the limits, with its size.
type Oversize struct {
	Func   *ast.FuncDecl
	Lines  int
	Params int
}

// String says which limits the function passes.
func (o Oversize) String() string {
	var over []string
	if o.Lines > maxFuncLines {
		over = append(over, fmt.Sprintf("%d lines (at most %d: split it into helpers)", o.Lines, maxFuncLines))
	}
	if o.Params > maxFuncParams {
		over = append(over, fmt.Sprintf("%d parameters (at most %d: pass a struct)", o.Params, maxFuncParams))
	}
	return o.Func.Name.Name + " has " + strings.Join(over, " and ")
}

// Oversized returns the functions and methods of f, parsed with fset, that
// are over a limit, in the order they appear.
func Oversized(fset *token.FileSet, f *ast.File) []Oversize {
	var out []Oversize
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		o := Oversize{
			Func:   fn,
			Lines:  fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1,
			Params: countParams(fn.Type.Params),
		}
		if o.Lines > maxFuncLines || o.Params > maxFuncParams {
			out = append(out, o)
		}
	}
	return out
}

// countParams counts the parameters of a list: each name, or one for a
// field without names.
func countParams(params *ast.FieldList) int {
	n := 0
	for _, p := range params.List {
		n += max(len(p.Names), 1)
	}
	return n
}
