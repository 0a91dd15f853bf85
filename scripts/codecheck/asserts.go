package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
)

// failing are the methods of testing.T that end a test as failed or
// skipped.
var failing = map[string]bool{
	"Error": true, "Errorf": true, "Fatal": true, "Fatalf": true,
	"Fail": true, "FailNow": true, "Skip": true, "Skipf": true, "SkipNow": true,
}

// checkAsserts reports the Test functions in files that cannot fail, past
// the exceptions, and returns how many it reported.
func checkAsserts(files []string) (int, error) {
	found := 0
	for _, name := range files {
		if !strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return found, err
		}
		for _, test := range Unasserted(f) {
			if _, ok := exceptions[filepath.ToSlash(name)+":"+test.Name.Name]; ok {
				continue
			}
			fmt.Printf("%s: %s asserts nothing: it calls no t.Error, t.Fatal, t.Fail or t.Skip and passes t to no helper\n",
				fset.Position(test.Pos()), test.Name.Name)
			found++
		}
	}
	return found, nil
}

// Unasserted returns the Test functions of f that never call a failing
// method of a *testing.T they hold (their own or a subtest's), never pass
// one on to a function, and never run a subtest from a named function.
func Unasserted(f *ast.File) []*ast.FuncDecl {
	var out []*ast.FuncDecl
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
			continue
		}
		if !asserts(fn.Type, fn.Body) {
			out = append(out, fn)
		}
	}
	return out
}

// asserts reports whether body, with the parameters of typ, can fail.
func asserts(typ *ast.FuncType, body *ast.BlockStmt) bool {
	ts := map[string]bool{} // the names that hold a *testing.T or testing.TB
	addTs(ts, typ)
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if found {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			addTs(ts, n.Type)
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && ts[id.Name] {
					if failing[sel.Sel.Name] {
						found = true
					}
					// t.Run(name, namedTest): the named function takes t.
					if sel.Sel.Name == "Run" && len(n.Args) == 2 {
						if _, lit := n.Args[1].(*ast.FuncLit); !lit {
							found = true
						}
					}
				}
			}
			for _, a := range n.Args {
				if id, ok := a.(*ast.Ident); ok && ts[id.Name] {
					found = true // a helper that takes t
				}
			}
		}
		return !found
	})
	return found
}

// addTs adds the names of typ's parameters of type *testing.T or
// testing.TB to ts.
func addTs(ts map[string]bool, typ *ast.FuncType) {
	for _, p := range typ.Params.List {
		if isTestingT(p.Type) {
			for _, n := range p.Names {
				ts[n.Name] = true
			}
		}
	}
}

// isTestingT reports whether e spells *testing.T or testing.TB.
func isTestingT(e ast.Expr) bool {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
		sel, ok := e.(*ast.SelectorExpr)
		return ok && isIdent(sel.X, "testing") && sel.Sel.Name == "T"
	}
	sel, ok := e.(*ast.SelectorExpr)
	return ok && isIdent(sel.X, "testing") && sel.Sel.Name == "TB"
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
