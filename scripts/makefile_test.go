package scripts

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// `make test` runs every suite even when the first fails, and fails at the
// end naming the suites that failed. GO is a stub that records the module
// it tests and fails for the ones in fail.
func TestMakeTestRunsEverySuite(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	for _, tc := range []struct {
		name string
		fail []string // modules (directory names; "." the library) whose tests fail
		want string   // the summary line of make's output
	}{
		{"all pass", nil, "make test: all 5 suites passed"},
		{"first fails", []string{"."}, "make test: FAILED: test-lib"},
		{"two fail", []string{".", "bench"}, "make test: FAILED: test-lib test-bench"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "calls")
			stub := filepath.Join(dir, "go")
			body := fmt.Sprintf("#!/bin/sh\nm=$(basename \"$PWD\")\n[ \"$PWD\" = %q ] && m=.\necho \"$m $*\" >> %q\ncase \" %s \" in *\" $m \"*) exit 1 ;; esac\n",
				repoRoot(t), log, strings.Join(tc.fail, " "))
			if err := os.WriteFile(stub, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("make", "--no-print-directory", "-C", repoRoot(t), "test", "GO="+stub)
			cmd.Env = append(os.Environ(), "REDLOCK_NO_INSTALL=1", "MAKEFLAGS=")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			switch {
			case len(tc.fail) == 0 && err != nil:
				t.Fatalf("make test failed: %v\n%s", err, out)
			case len(tc.fail) > 0 && !errors.As(err, &exit):
				t.Fatalf("make test: %v, want a failure\n%s", err, out)
			}
			var summary []string
			for _, line := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(line, "make test: ") {
					summary = append(summary, line)
				}
			}
			if !slices.Equal(summary, []string{tc.want}) {
				t.Errorf("make test summed up with %q, want %q\n%s", summary, tc.want, out)
			}
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			var modules []string
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				m, args, _ := strings.Cut(line, " ")
				if !strings.HasPrefix(args, "test -race -count=1 ./...") {
					t.Errorf("the suite in %s ran %q, want go test -race -count=1 ./...", m, args)
				}
				modules = append(modules, m)
			}
			if want := []string{".", "integration", "bench", "redlockotel", "fenced-postgres"}; !slices.Equal(modules, want) {
				t.Errorf("make test ran the suites of %q, want %q", modules, want)
			}
		})
	}
}

// repoRoot is the repository's top directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}
