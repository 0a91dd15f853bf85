package main

import (
	"strings"
	"testing"
)

func TestBadInput(t *testing.T) {
	t.Parallel()
	nodes := nodesURL(sharedNodes)
	tests := []struct {
		name string
		env  []string
		args []string
		want string // in stderr
	}{
		{"no command", nil, nil, "usage: redlock COMMAND"},
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"flag before command", nil, []string{"--ttl", "1s", "run"}, "flags come after it"},
		{"help for unknown command", nil, []string{"help", "frobnicate"}, `unknown command "frobnicate"`},

		{"run: missing --", nil, []string{"run", "k", "echo", "hi"}, `missing "--" between KEY and COMMAND`},
		{"run: missing -- and command", nil, []string{"run", "k"}, `missing "-- COMMAND" after KEY`},
		{"run: missing KEY", nil, []string{"run", "--", "echo"}, "missing KEY"},
		{"run: missing command", nil, []string{"run", "k", "--"}, "missing COMMAND"},
		{"run: two keys", nil, []string{"run", "a", "b", "--", "echo"}, "one KEY"},
		{"run: empty key", nil, []string{"run", "", "--", "echo"}, "empty KEY"},
		{"run: unknown flag", nil, []string{"run", "--bogus", "k", "--", "echo"}, "unknown flag --bogus"},
		{"run: unknown flag after KEY", nil, []string{"run", "k", "--bogus", "--", "echo"}, "unknown flag --bogus"},
		{"run: bad duration", nil, []string{"run", "--ttl", "soon", "k", "--", "echo"}, `invalid value "soon" for flag --ttl`},
		{"run: negative wait", []string{envNodes + "=" + nodes}, []string{"run", "--wait", "-1s", "k", "--", "true"}, "--wait -1s must not be negative"},
		{"run: bad wait", nil, []string{"run", "--wait", "never", "k", "--", "true"}, `or "forever"`},
		{"run: -n and -w", []string{envNodes + "=" + nodes}, []string{"run", "-n", "-w", "5", "k", "--", "true"}, "exclude each other"},
		{"run: conflict exit code above 255", []string{envNodes + "=" + nodes}, []string{"run", "-E", "256", "k", "--", "true"}, "--conflict-exit-code 256 is not between 0 and 255"},
		{"run: negative outage exit code", []string{envNodes + "=" + nodes}, []string{"run", "--outage-exit-code", "-1", "k", "--", "true"}, "--outage-exit-code -1 is not between 0 and 255"},
		{"hold: missing KEY", nil, []string{"hold"}, "missing KEY"},
		{"hold: two keys", nil, []string{"hold", "a", "b"}, "one KEY"},
		{"hold: bad wait", nil, []string{"hold", "-w", "x", "k"}, `or "forever"`},
		{"run: negative grace", []string{envNodes + "=" + nodes}, []string{"run", "--grace", "-1s", "k", "--", "true"}, "--grace"},
		{"run: zero TTL", []string{envNodes + "=" + nodes}, []string{"run", "--ttl", "0", "k", "--", "true"}, "TTL 0s must be positive"},
		{"run: node timeout above TTL", []string{envNodes + "=" + nodes}, []string{"run", "--ttl", "1s", "--node-timeout", "2s", "k", "--", "true"}, "node timeout"},
		{"run: TTL too short to extend in time", []string{envNodes + "=" + nodes}, []string{"run", "--ttl", "1s", "--node-timeout", "500ms", "short-ttl", "--", "echo", "ran"}, "leaves no time to extend the lock"},
		{"run: TTL above restart guard", []string{envNodes + "=" + nodes}, []string{"run", "--restart-guard", "10s", "--ttl", "30s", "k", "--", "true"}, "restart guard"},
		{"run: cooldown above restart guard", []string{envNodes + "=" + nodes}, []string{"run", "--restart-guard", "1m", "--cooldown", "2m", "k", "--", "true"}, "--cooldown 2m0s is above --restart-guard 1m0s"},

		{"no nodes", nil, []string{"run", "k", "--", "true"}, "no nodes: give --nodes or set REDLOCK_NODES"},
		{"empty node list", nil, []string{"run", "--nodes", " , ", "k", "--", "true"}, "no nodes"},
		{"not a URL", nil, []string{"run", "--nodes", "localhost", "k", "--", "true"}, "node 1 (localhost): not a URL"},
		{"wrong scheme", nil, []string{"run", "--nodes", "redis://127.0.0.1:1,http://127.0.0.1:2", "k", "--", "true"}, `node 2 (http://127.0.0.1:2): unsupported scheme "http"`},
		{"unix socket", nil, []string{"run", "--nodes", "unix:///tmp/redis.sock", "k", "--", "true"}, `unsupported scheme "unix"`},
		{"bad port", nil, []string{"run", "--nodes", "redis://127.0.0.1:port", "k", "--", "true"}, "(redis://127.0.0.1:xxxxx): malformed URL: the port is not a number"},
		{"missing host", nil, []string{"run", "--nodes", "redis:///0", "k", "--", "true"}, "missing host"},
		{"bad database", nil, []string{"run", "--nodes", "redis://127.0.0.1:1/abc", "k", "--", "true"}, "(redis://127.0.0.1:1/...): invalid database number: the path must be /<number>"},
		{"unknown URL option", nil, []string{"run", "--nodes", "redis://127.0.0.1:1?frob=1", "k", "--", "true"}, "unexpected option: frob"},
		{"same node twice", nil, []string{"run", "--nodes", "redis://127.0.0.1:7,redis://localhost:7", "k", "--", "true"}, "same node"},
		{"bad node timeout", nil, []string{"run", "--nodes", nodes, "--node-timeout", "0", "k", "--", "true"}, "--node-timeout 0s must be positive"},

		{"inspect: missing KEY", nil, []string{"inspect"}, "missing KEY"},
		{"inspect: two keys", nil, []string{"inspect", "a", "b"}, "one KEY expected"},
		{"release: no --force", []string{envNodes + "=" + nodes}, []string{"release", "k"}, "--force is required"},
		{"release: missing KEY", nil, []string{"release", "--force", "--yes"}, "missing KEY"},
		{"bootstrap: argument", nil, []string{"bootstrap", "k"}, `no arguments expected, got "k"`},

		// Every subcommand: the same duration syntax, long flag names in
		// messages, the same --wait.
		{"elect: bad duration", nil, []string{"elect", "--ttl", "soon", "n", "--", "true"}, `invalid value "soon" for flag --ttl`},
		{"elect: bad wait", nil, []string{"elect", "-w", "never", "n", "--", "true"}, `invalid value "never" for flag --wait`},
		{"elect: -n and -w", []string{envNodes + "=" + nodes}, []string{"elect", "-n", "-w", "5", "n", "--", "true"}, "exclude each other"},
		{"doctor: bad duration", nil, []string{"doctor", "--clock-window", "soon"}, `invalid value "soon" for flag --clock-window`},
		{"hold: flag without value", nil, []string{"hold", "k", "--ttl"}, "flag needs an argument: --ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := redlockRun(t, tt.env, tt.args...)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr does not contain %q:\n%s", tt.want, stderr)
			}
			if !strings.Contains(stderr, "usage: redlock") {
				t.Errorf("stderr has no usage line:\n%s", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"usage: redlock COMMAND", "run", "hold", "inspect", "release", "bootstrap", "--version"}},
		{[]string{"help"}, []string{"usage: redlock COMMAND"}},
		{[]string{"run", "--help"}, []string{"usage: redlock run [flags] KEY -- COMMAND [ARGS...]", "--ttl", "--wait", "--cooldown", "--metadata", "--fencing", "--restart-guard", "--grace", "--nodes", "Exit codes", "REDLOCK_FENCE",
			"-n, --no-wait", "-w, --wait duration|forever", "-E, --conflict-exit-code", "--outage-exit-code", "--pass-nodes",
			"--unsafe-grace", "--tls-ca FILE", "--tls-cert FILE", "--tls-key FILE"}},
		{[]string{"elect", "--help"}, []string{"-n, --no-wait", "-w, --wait duration|forever", "--unsafe-grace", "--pass-nodes", "--ttl duration"}},
		{[]string{"leader", "--help"}, []string{"--json", "--watch"}},
		{[]string{"hold", "--help"}, []string{"usage: redlock hold [flags] KEY", "-w, --wait", "--fencing", "Exit codes"}},
		{[]string{"run", "-h"}, []string{"usage: redlock run"}},
		{[]string{"run", "k", "--help", "--", "true"}, []string{"usage: redlock run"}},
		{[]string{"help", "run"}, []string{"usage: redlock run"}},
		{[]string{"inspect", "--help"}, []string{"usage: redlock inspect [flags] KEY", "--json", "--nodes"}},
		{[]string{"release", "--help"}, []string{"usage: redlock release --force --yes [flags] KEY", "--force", "--yes"}},
		{[]string{"bootstrap", "--help"}, []string{"usage: redlock bootstrap [flags]", "--nodes"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := redlockRun(t, nil, tt.args...)
			if code != 0 || stderr != "" {
				t.Errorf("exit code %d, stderr %q; want 0 and none", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("help does not mention %q:\n%s", w, stdout)
				}
			}
		})
	}
}
