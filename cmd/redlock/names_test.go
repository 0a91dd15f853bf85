package main

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// TestReservedKeys: no subcommand lets a KEY reach the library's own keys;
// each exits with the usage code and one line that says why, and the
// restart guard's markers survive every attempt.
func TestReservedKeys(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)
	if code, stdout, stderr := redlockRun(t, env, "bootstrap"); code != 0 {
		t.Fatalf("bootstrap: code %d\n%s\n%s", code, stdout, stderr)
	}
	keys := []string{"redlock:guard:marker", "redlock:guard:quarantine", "redlock:fence:job", "redlock:released:job", "redlock:"}
	commands := map[string]func(key string) []string{
		"run":                   func(k string) []string { return []string{"run", k, "--", "echo", "ran"} },
		"run --wait":            func(k string) []string { return []string{"run", "--wait", "5s", k, "--", "echo", "ran"} },
		"inspect":               func(k string) []string { return []string{"inspect", k} },
		"inspect --json":        func(k string) []string { return []string{"inspect", "--json", k} },
		"release --force":       func(k string) []string { return []string{"release", "--force", k} },
		"release --force --yes": func(k string) []string { return []string{"release", "--force", "--yes", k} },
		"run --restart-guard 1m": func(k string) []string {
			return []string{"run", "--restart-guard", "1m", "--ttl", "10s", k, "--", "echo", "ran"}
		},
	}
	// The group ends when its parallel subtests have.
	t.Run("group", func(t *testing.T) {
		for name, args := range commands {
			for _, key := range keys {
				t.Run(name+"/"+key, func(t *testing.T) {
					t.Parallel()
					code, stdout, stderr := redlockRun(t, env, args(key)...)
					if code != exitUsage {
						t.Errorf("exit code %d, want %d", code, exitUsage)
					}
					if stdout != "" {
						t.Errorf("stdout %q, want none", stdout)
					}
					first, _, _ := strings.Cut(stderr, "\n")
					if !strings.Contains(first, `starts with "redlock:", which is reserved`) || !strings.Contains(stderr, "usage: redlock") {
						t.Errorf("stderr does not say on its first line that the key is reserved:\n%s", stderr)
					}
				})
			}
		}
	})
	for i, v := range keyOn(t, servers, "redlock:guard:marker") {
		if v == "" {
			t.Errorf("node %d lost its restart-guard marker", i)
		}
	}
}

// TestKeyContainingPrefix: a KEY that merely contains "redlock:" is an
// ordinary key.
func TestKeyContainingPrefix(t *testing.T) {
	t.Parallel()
	key := "app:redlock:guard:marker"
	code, stdout, stderr := redlockRun(t, sharedEnv(), "run", key, "--", "echo", "ran")
	if code != 0 || stdout != "ran" {
		t.Fatalf("run: code %d, stdout %q\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := redlockRun(t, sharedEnv(), "inspect", key); code != 0 || !strings.Contains(stdout, "not held") {
		t.Fatalf("inspect: code %d\n%s\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := redlockRun(t, sharedEnv(), "release", "--force", "--yes", key); code != 0 || !strings.Contains(stdout, "removed lock") {
		t.Fatalf("release: code %d\n%s\n%s", code, stdout, stderr)
	}
}
