package redlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/redlock"
)

// doc.go's Goroutines section names every place the package starts a
// goroutine, and its figures are the code's: a new goroutine, or a changed
// count of workers, fails here until the section says so.
func TestDocGoroutines(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	// The section runs from its heading to the paragraph after it that
	// points to the docs.
	start, end := strings.Index(doc, "// # Goroutines"), strings.Index(doc, "// Guarantees: docs/safety.md")
	if start < 0 || end < start {
		t.Fatal("doc.go has no Goroutines section")
	}
	section := strings.Join(strings.Fields(strings.ReplaceAll(doc[start:end], "//", "")), " ")
	words := map[int]string{1: "one", 2: "two", 3: "three", 4: "four"}
	if want := "New starts " + words[redlock.WorkersPerNode] + " per node"; !strings.Contains(section, want) {
		t.Errorf("the Goroutines section does not say %q", want)
	}
	// Where each goroutine starts (the function around the go statement
	// or WaitGroup.Go), and what the section calls it.
	owners := map[string]string{
		"NewPipe":                  "Node workers",
		"(*Notifier).connect":      "Release listeners",
		"(*Notifier).settled":      "Release listeners",
		"(*Notifier).WaitAny":      "ObtainMulti",
		"(*extender).kick":         "The extender",
		"(*extender).run":          "each round in a goroutine of its own",
		"(*Locker).settleExtended": "tells each in a goroutine of its own",
		"(*Locker).Observe":        "Observe runs one goroutine per call",
		"(*Locker).inspectAll":     "Inspect of a Semaphore or RWMutex",
		"NewCluster":               "reads the cluster's slot map",
		"NewSentinel":              "watches the group's sentinels",
		"(*Locker).bootstrapSlots": "Bootstrap on a Locker with a cluster node",
	}
	// The package's own files and those of its internal packages (the
	// connection layer starts the node workers).
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := filepath.Glob("internal/*/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, inner...)
	found := map[string]bool{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil {
				typ := fd.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					name = "(*" + star.X.(*ast.Ident).Name + ")." + name
				} else {
					name = typ.(*ast.Ident).Name + "." + name
				}
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				starts := false
				switch n := n.(type) {
				case *ast.GoStmt:
					starts = true
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					starts = ok && sel.Sel.Name == "Go"
				}
				if starts {
					found[name] = true
					phrase, ok := owners[name]
					switch {
					case !ok:
						t.Errorf("%s starts a goroutine that doc.go's Goroutines section does not list", name)
					case !strings.Contains(section, phrase):
						t.Errorf("doc.go's Goroutines section lacks %q (for %s)", phrase, name)
					}
				}
				return true
			})
		}
	}
	for name := range owners {
		if !found[name] {
			t.Errorf("doc.go's Goroutines section lists %s, which starts no goroutine", name)
		}
	}
}
