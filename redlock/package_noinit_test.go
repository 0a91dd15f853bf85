package redlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Importing the library changes nothing in the importer's process: no
// package of the library has an init function (go-redis's logger, say, is
// installed only by a program that asks: RedisLogger).
func TestNoInit(t *testing.T) {
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "cmd", "integration", "bench", "redlockotel", "examples", "internal", "scripts", ".git":
				return filepath.SkipDir // not the library a user imports
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, obj := range f.Decls {
			if fd, ok := obj.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
				t.Errorf("%s has an init function", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
