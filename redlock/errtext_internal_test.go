package redlock

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/quorum"
)

// Every format or message literal that builds an error in the library
// (errors.New, fmt.Errorf, invalid, and the texts of the error types) is
// one line: no literal newline or carriage return.
func TestErrorLiteralsOneLine(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !buildsError(call.Fun) {
				return true
			}
			ast.Inspect(call, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("%s: %v", fset.Position(lit.Pos()), err)
				}
				checked++
				if strings.ContainsAny(s, "\n\r") {
					t.Errorf("%s: error text %q spans lines", fset.Position(lit.Pos()), s)
				}
				return true
			})
			return true
		})
	}
	if checked < 50 {
		t.Fatalf("only %d error literals found: the walk misses the constructors", checked)
	}
}

// buildsError reports whether fun is a function that builds an error's
// text.
func buildsError(fun ast.Expr) bool {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name == "invalid"
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && (x.Name == "errors" && f.Sel.Name == "New" || x.Name == "fmt" && f.Sel.Name == "Errorf")
	}
	return false
}

// The scripts' error replies reach callers as node errors: one line too.
func TestScriptErrorsOneLine(t *testing.T) {
	files, err := filepath.Glob("internal/scripts/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(src), "\n") {
			if strings.Contains(line, "error_reply(") && strings.Contains(line, `\n`) {
				t.Errorf("%s: error reply spans lines: %s", name, line)
			}
		}
	}
}

// The library's errors, built with hostile parts (keys, addresses, node
// errors and metadata holding newlines and control bytes), print as one
// line.
func TestErrorsPrintOneLine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	hostile := "a\nb\r\nc\x00d\x1b[2Je"
	nodeErr := errors.New("ERR from server\nsecond line")
	k := &Lock{key: hostile}
	cases := map[string]error{
		"ErrNotObtained": ErrNotObtained,
		"ErrNoQuorum":    ErrNoQuorum,
		"ErrLockExpired": ErrLockExpired,
		"ErrLockLost":    ErrLockLost,
		"ErrReleased":    ErrReleased,
		"ErrInvalid":     ErrInvalid,
		"ErrClosed":      ErrClosed,
		"forced":         errGoneForced,
		"forced, taken":  errLostForced,
		"invalid key":    checkKey(ReservedPrefix + hostile),
		"notTried":       notTried(ctx, hostile),
		"releasedErr":    k.releasedErr("extend"),
		"ctxError":       withContext(ctx, ErrNoQuorum),
		"lost":           &lostError{reason: ErrLockExpired},
		"lost by":        &lostError{reason: newQuorumError("extend", hostile, 2, nil, ErrLockLost)},
		"waited":         newQuorumError("obtain", hostile, 2, nil, ErrNotObtained),
		"quorum": newQuorumError("obtain", hostile, 2, []NodeResult{
			{Addr: "host\n1:6379", Outcome: OutcomeError, Err: nodeErr},
			{Addr: "h2:6379", Outcome: OutcomeHeldByOther, TTL: time.Second, Metadata: hostile},
			{Addr: "h3:6379", Outcome: OutcomeError, Err: quorum.ErrTimeout},
			{Addr: "h4:6379", Outcome: OutcomeNoReply},
		}, ErrNotObtained),
	}
	for name, err := range cases {
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if msg := err.Error(); strings.ContainsAny(msg, "\n\r\x00\x1b") {
			t.Errorf("%s: %q is not one clean line", name, msg)
		}
	}
}

func TestQuoteKey(t *testing.T) {
	long := strings.Repeat("a", 39) + "é" + strings.Repeat("m", 100) + "ü" + strings.Repeat("z", 19)
	for _, tc := range []struct{ key, want string }{
		{"k", `"k"`},
		{"a\nb", `"a\nb"`},
		{strings.Repeat("x", keyShortAt), strconv.Quote(strings.Repeat("x", keyShortAt))},
		{strings.Repeat("x", 100), `"` + strings.Repeat("x", 40) + `…` + strings.Repeat("x", 20) + `" (100 bytes)`},
		// The cuts fall on rune boundaries: a rune that straddles one is
		// left out, never split.
		{long, `"` + strings.Repeat("a", 39) + `…` + strings.Repeat("z", 19) + `" (` + strconv.Itoa(len(long)) + ` bytes)`},
		{"\xff" + strings.Repeat("y", 99), `"\xff` + strings.Repeat("y", 39) + `…` + strings.Repeat("y", 20) + `" (100 bytes)`},
	} {
		if got := quoteKey(tc.key); got != tc.want {
			t.Errorf("quoteKey(%.20q…) = %s, want %s", tc.key, got, tc.want)
		}
	}
}
