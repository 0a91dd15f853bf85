package doctor_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// doc.go says where the package starts goroutines: in Check's fan-out,
// probeAll, one per node. The package's go statements and WaitGroup.Go
// calls are there and nowhere else.
func TestDocGoroutines(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Check runs one goroutine per node"; !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), want) {
		t.Errorf("doc.go does not say %q", want)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					found[fn.Name.Name] = true
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Go" {
						found[fn.Name.Name] = true
					}
				}
				return true
			})
		}
	}
	if len(found) != 1 || !found["probeAll"] {
		t.Errorf("goroutines start in %v, want probeAll only (update doc.go and this test)", found)
	}
}
