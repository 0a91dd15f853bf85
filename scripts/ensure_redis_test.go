// Package scripts holds the repository's shell scripts; its tests run them
// against stubs of the system tools they call.
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

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// machine is what the stubs on PATH pretend the system is.
type machine struct {
	os    string   // what uname -s prints
	uid   string   // what id -u prints
	tools []string // stubs present: apt-get, dnf, apk, brew, sudo, redis-server, cc, initdb
	redis string   // the version a present redis-server reports (default 7.2.4)
	fail  string   // a stub fails when its name and arguments start with this ("apt-get install")
	env   []string // more environment
}

// run runs ensure-redis.sh with shell sh, args, and only the stubs of m on
// PATH. It returns the commands the stubs recorded, one "name args" each,
// the script's standard error, and its exit code.
func run(t *testing.T, sh string, m machine, args ...string) (calls []string, stderr string, code int) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "calls")
	cp, err := exec.LookPath("cp")
	if err != nil {
		t.Fatal(err)
	}
	if m.redis == "" {
		m.redis = "7.2.4"
	}
	record := fmt.Sprintf("echo \"${0##*/} $*\" >> %q\n", log)
	if m.fail != "" {
		record += fmt.Sprintf("case \"${0##*/} $*\" in %q*) exit 100 ;; esac\n", m.fail)
	}
	redisStub := record + fmt.Sprintf("echo 'Redis server v=%s sha=00000000:0 malloc=libc bits=64'\n", m.redis)
	// The package managers "install" by copying these stubs onto PATH.
	pending := filepath.Join(dir, "pending")
	if err := os.Mkdir(pending, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"redis-server": redisStub, "cc": record, "initdb": record} {
		if err := os.WriteFile(filepath.Join(pending, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	install := fmt.Sprintf(`for a in "$@"; do
	case $a in
	redis | redis-server) %[1]s -p %[2]q %[3]q ;;
	gcc) %[1]s -p %[4]q %[5]q ;;
	postgresql | postgresql-server) %[1]s -p %[6]q %[7]q ;;
	esac
done
`, cp, filepath.Join(pending, "redis-server"), filepath.Join(bin, "redis-server"),
		filepath.Join(pending, "cc"), filepath.Join(bin, "cc"),
		filepath.Join(pending, "initdb"), filepath.Join(bin, "initdb"))
	stubs := map[string]string{
		"uname": "echo " + m.os + "\n",
		"id":    "echo " + m.uid + "\n",
	}
	for _, tool := range m.tools {
		switch tool {
		case "sudo":
			stubs[tool] = record + "exec \"$@\"\n"
		case "apt-get", "dnf", "apk", "brew":
			stubs[tool] = record + install
		case "redis-server":
			stubs[tool] = redisStub
		case "cc", "initdb":
			stubs[tool] = record
		default:
			t.Fatalf("no stub for %q", tool)
		}
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.Command(sh, append([]string{"ensure-redis.sh"}, args...)...)
	// The machine's own PostgreSQL, where Debian keeps it, is not the stubs'.
	cmd.Env = append([]string{"PATH=" + bin, "HOME=" + dir, "REDLOCK_POSTGRES_LIB=" + filepath.Join(dir, "nopg")}, m.env...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if len(out) > 0 {
		t.Errorf("stdout should be empty, got %q", out)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if s := strings.TrimSuffix(string(b), "\n"); s != "" {
		calls = strings.Split(s, "\n")
	}
	return calls, errb.String(), code
}

func TestEnsureRedis(t *testing.T) {
	root := "0"
	user := "1000"
	for _, tc := range []struct {
		name  string
		m     machine
		args  []string
		calls []string // nil: none
		code  int
		say   []string // in standard error
		quiet bool     // nothing on standard error
	}{
		{
			name:  "root with apt-get",
			m:     machine{os: "Linux", uid: root, tools: []string{"apt-get"}},
			calls: []string{"apt-get update", "apt-get install -y redis-server", "redis-server --version"},
			say:   []string{"running: apt-get update\n", "running: apt-get install -y redis-server\n", "installed: redis-server\n"},
		},
		{
			name: "user with sudo and apt-get",
			m:    machine{os: "Linux", uid: user, tools: []string{"apt-get", "sudo"}},
			calls: []string{
				"sudo apt-get update", "apt-get update",
				"sudo apt-get install -y redis-server", "apt-get install -y redis-server",
				"redis-server --version",
			},
			say: []string{"running: sudo apt-get update\n", "running: sudo apt-get install -y redis-server\n"},
		},
		{
			name: "user without sudo",
			m:    machine{os: "Linux", uid: user, tools: []string{"apt-get"}},
			code: 1,
			say:  []string{"not root and no sudo, so not installing. Run as root: apt-get update && apt-get install -y redis-server\n"},
		},
		{
			name:  "macOS with brew",
			m:     machine{os: "Darwin", uid: "501", tools: []string{"brew", "sudo"}},
			calls: []string{"brew install redis", "redis-server --version"},
			say:   []string{"running: brew install redis\n"},
		},
		{
			name: "macOS without brew",
			m:    machine{os: "Darwin", uid: "501", tools: []string{"sudo"}},
			code: 1,
			say:  []string{"Homebrew is not installed (https://brew.sh). Then run: brew install redis\n"},
		},
		{
			name:  "root with dnf",
			m:     machine{os: "Linux", uid: root, tools: []string{"dnf"}},
			calls: []string{"dnf install -y redis", "redis-server --version"},
		},
		{
			name:  "user with sudo and apk",
			m:     machine{os: "Linux", uid: user, tools: []string{"apk", "sudo"}},
			calls: []string{"sudo apk add redis", "apk add redis", "redis-server --version"},
		},
		{
			name: "no package manager known",
			m:    machine{os: "Linux", uid: root, tools: []string{"sudo"}},
			code: 1,
			say:  []string{"redis-server not found, and none of apt-get, dnf, apk or brew", "on Debian/Ubuntu: sudo apt-get install -y redis-server\n"},
		},
		{
			name:  "already installed",
			m:     machine{os: "Linux", uid: root, tools: []string{"apt-get", "sudo", "redis-server"}},
			calls: []string{"redis-server --version"},
			quiet: true,
		},
		{
			name:  "installed but older than 7.0",
			m:     machine{os: "Linux", uid: root, tools: []string{"apt-get", "redis-server"}, redis: "6.0.16"},
			calls: []string{"redis-server --version"},
			say:   []string{"redis-server 6.0.16 is older than 7.0"},
		},
		{
			name:  "C compiler",
			m:     machine{os: "Linux", uid: root, tools: []string{"apt-get", "redis-server"}},
			args:  []string{"redis-server", "cc"},
			calls: []string{"apt-get update", "apt-get install -y gcc libc6-dev"},
		},
		{
			name:  "both at once",
			m:     machine{os: "Linux", uid: root, tools: []string{"apt-get"}},
			args:  []string{"redis-server", "cc"},
			calls: []string{"apt-get update", "apt-get install -y redis-server gcc libc6-dev", "redis-server --version"},
			say:   []string{"installed: redis-server cc\n"},
		},
		{
			name:  "C compiler present",
			m:     machine{os: "Linux", uid: root, tools: []string{"apt-get", "cc"}},
			args:  []string{"cc"},
			quiet: true,
		},
		{
			name: "C compiler on macOS",
			m:    machine{os: "Darwin", uid: "501", tools: []string{"brew"}},
			args: []string{"cc"},
			code: 1,
			say:  []string{"run: xcode-select --install\n"},
		},
		{
			name:  "install fails",
			m:     machine{os: "Linux", uid: root, tools: []string{"apt-get"}, fail: "apt-get install"},
			calls: []string{"apt-get update", "apt-get install -y redis-server"},
			code:  1,
			say:   []string{"failed: apt-get install -y redis-server\n", "run it yourself: apt-get update && apt-get install -y redis-server\n"},
		},
		{
			name: "installing turned off",
			m:    machine{os: "Linux", uid: user, tools: []string{"apt-get", "sudo"}, env: []string{"REDLOCK_NO_INSTALL=1"}},
			code: 1,
			say:  []string{"not installing. Run: sudo apt-get update && sudo apt-get install -y redis-server\n"},
		},
		{
			name:  "PostgreSQL",
			m:     machine{os: "Linux", uid: root, tools: []string{"apt-get", "redis-server", "cc"}},
			args:  []string{"redis-server", "cc", "postgres"},
			calls: []string{"apt-get update", "apt-get install -y postgresql"},
			say:   []string{"installed: postgres\n"},
		},
		{
			name:  "PostgreSQL with dnf",
			m:     machine{os: "Linux", uid: root, tools: []string{"dnf"}},
			args:  []string{"postgres"},
			calls: []string{"dnf install -y postgresql-server"},
		},
		{
			name:  "PostgreSQL present",
			m:     machine{os: "Linux", uid: root, tools: []string{"apt-get", "initdb"}},
			args:  []string{"postgres"},
			quiet: true,
		},
		{
			name: "unknown tool",
			m:    machine{os: "Linux", uid: root, tools: []string{"apt-get"}},
			args: []string{"redis"},
			code: 2,
			say:  []string{`unknown tool "redis": expected redis-server, cc or postgres`},
		},
	} {
		// dash is what /bin/sh is on Debian; bash too, where present.
		for _, sh := range []string{"/bin/sh", "bash"} {
			path, err := exec.LookPath(sh)
			if err != nil {
				continue
			}
			t.Run(tc.name+"/"+filepath.Base(sh), func(t *testing.T) {
				calls, stderr, code := run(t, path, tc.m, tc.args...)
				if !slices.Equal(calls, tc.calls) {
					t.Errorf("calls:\n%q\nwant:\n%q", calls, tc.calls)
				}
				if code != tc.code {
					t.Errorf("exit code %d, want %d", code, tc.code)
				}
				for _, s := range tc.say {
					if !strings.Contains(stderr, s) {
						t.Errorf("stderr lacks %q:\n%s", s, stderr)
					}
				}
				if tc.quiet && stderr != "" {
					t.Errorf("stderr should be empty:\n%s", stderr)
				}
			})
		}
	}
}
