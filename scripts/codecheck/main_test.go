package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

func TestRegroup(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{
			name: "grouped",
			in: `package p

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/quorum"
)
`,
		},
		{
			name: "module first",
			in: `package p

import (
	"github.com/quorumlock/redlock/redlock/internal/conn"

	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)
`,
			want: `package p

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/redlock/redlock/internal/conn"
)
`,
		},
		{
			name: "mixed group, comments kept with their import",
			in: `package p

import (
	"testing"
	// the driver
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	"github.com/quorumlock/redlock/quorum"
	"errors"
)
`,
			want: `package p

import (
	"testing"
	"errors"

	// the driver
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"

	"github.com/quorumlock/redlock/quorum"
)
`,
		},
		{name: "single import", in: "package p\n\nimport \"fmt\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == "" {
				want = tc.in
			}
			got, err := Regroup([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Fatalf("Regroup:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestUnasserted(t *testing.T) {
	src := `package p_test

import "testing"

func TestFatal(t *testing.T)      { if false { t.Fatal("x") } }
func TestSkip(t *testing.T)       { t.Skip("later") }
func TestHelper(t *testing.T)     { check(t, 1) }
func TestSubtest(t *testing.T)    { t.Run("a", func(t *testing.T) { t.Error("x") }) }
func TestNamedSub(t *testing.T)   { t.Run("a", testA) }
func TestOtherName(tt *testing.T) { tt.Errorf("x") }
func TestTB(t *testing.T)         { func(tb testing.TB) { tb.FailNow() }(t) }

func TestLogOnly(t *testing.T)    { t.Log("hello") }
func TestContextOnly(t *testing.T) { use(t.Context()) }
func TestEmptySub(t *testing.T)   { t.Run("a", func(t *testing.T) { t.Log("x") }) }
func TestOtherT(t *testing.T)     { var u struct{ Fatal func() }; u.Fatal() }

func TestMain(m *testing.M) {}
func helper(t *testing.T) {}
`
	f, err := parser.ParseFile(token.NewFileSet(), "x_test.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fn := range Unasserted(f) {
		got = append(got, fn.Name.Name)
	}
	want := []string{"TestLogOnly", "TestContextOnly", "TestEmptySub", "TestOtherT"}
	if !slices.Equal(got, want) {
		t.Fatalf("Unasserted = %v, want %v", got, want)
	}
}

func TestOversized(t *testing.T) {
	long := "func long() {\n" + strings.Repeat("\tprintln()\n", 58) + "}\n"     // 60 lines: allowed
	longer := "func longer() {\n" + strings.Repeat("\tprintln()\n", 59) + "}\n" // 61 lines
	src := `package p

func six(a, b, c int, d string, e []int, f ...any) {}
func seven(a, b, c, d, e, f, g int)                {}
func unnamed(int, int, int, int, int, int, int)    {}
func (r *T) method(a, b, c, d, e, f int)           {}
func (r *T) methodSeven(a, b, c, d, e, f, g int)   {}
func decl(a, b, c, d, e, f, g int)
var lit = func(a, b, c, d, e, f, g int) {}

` + long + longer
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range Oversized(fset, f) {
		got = append(got, fmt.Sprintf("%s %d %d", o.Func.Name.Name, o.Lines, o.Params))
	}
	want := []string{"seven 1 7", "unnamed 1 7", "methodSeven 1 7", "longer 61 0"}
	if !slices.Equal(got, want) {
		t.Fatalf("Oversized = %q, want %q", got, want)
	}
	if s := Oversized(fset, f)[3].String(); !strings.Contains(s, "61 lines (at most 60: split it into helpers)") || strings.Contains(s, "parameters") {
		t.Errorf("the report of a long function says %q", s)
	}
}
