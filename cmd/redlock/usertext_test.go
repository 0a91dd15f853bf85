package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// The rules every error text the CLI writes keeps (checkCLIText).
var (
	// replyCodes are the codes the library's scripts start their error
	// replies with, for the library to decode: a user reads words.
	replyCodes = regexp.MustCompile(`\b(ABSTAIN|INVALID|SIZE|DUPLICATE)\b`)
	// ownKeys are the library's own key names on the nodes
	// (redlock:sem:…, redlock:forced:…): the user's names only. The
	// prefix itself, quoted, may be named ("KEY may not start with
	// \"redlock:\"").
	ownKeys = regexp.MustCompile(`redlock:[^\s"]`)
)

// cliTextProblems lists what breaks a rule in stderr, a failed command's:
// a reply code, an internal key name, a doubled prefix (the library's
// "redlock: " after the command's own, or the same part twice in a row),
// or a message broken over lines (every line is one of the command's
// messages, or the usage and the pointer to --help that follow a usage
// error). given are names the user gave, which a message may repeat
// whatever they look like.
func cliTextProblems(stderr string, given ...string) []string {
	if strings.TrimSpace(stderr) == "" {
		return []string{"nothing on stderr"}
	}
	var out []string
	for line := range strings.Lines(stderr) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "redlock "), strings.HasPrefix(line, "redlock: "):
		case strings.HasPrefix(line, "usage: redlock "), strings.HasPrefix(line, `Run "redlock `):
			continue
		default:
			out = append(out, fmt.Sprintf("a line that is no message of its own (one broken over lines?): %q", line))
			continue
		}
		for _, g := range given {
			line = strings.ReplaceAll(line, g, "GIVEN")
		}
		if m := replyCodes.FindString(line); m != "" {
			out = append(out, fmt.Sprintf("reply code %s in %q", m, line))
		}
		if m := ownKeys.FindString(line); m != "" {
			out = append(out, fmt.Sprintf("the library's own key name (%s…) in %q", m, line))
		}
		if i := strings.Index(line, "redlock: "); i > 0 {
			out = append(out, fmt.Sprintf("a doubled prefix in %q", line))
		}
		parts := strings.Split(line, ": ")
		for i := 1; i < len(parts); i++ {
			if strings.EqualFold(parts[i], parts[i-1]) {
				out = append(out, fmt.Sprintf("%q twice in a row in %q", parts[i], line))
			}
		}
	}
	return out
}

// Every error text a user meets from the CLI, on real servers, keeps to
// checkCLIText's rules: usage errors, contention, outages, mistakes in
// the configuration, a semaphore of another size, the restart guard's
// abstention, a lock lost or force-released, a release that finds the
// lock gone.
func TestCLIErrorTexts(t *testing.T) {
	t.Parallel()
	servers := redistest.StartT(t, 3, redistest.Options{})
	env := nodesEnv(servers)
	down := redistest.StartT(t, 3, redistest.Options{})
	for _, s := range down[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	downEnv := nodesEnv(down)
	// Another address of servers[0]: found at the nodes, not in the URLs.
	twice, err := redistest.Forward(servers[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := twice.Close(); err != nil {
			t.Error(err)
		}
	})
	url := func(s *redistest.Server, suffix string) string { return "redis://" + s.Addr + suffix }
	// Held for the cases that meet contention: a lock, a semaphore of 1,
	// a writer.
	for _, args := range [][]string{
		{"run", "busy", "--", "sh", "-c", holdScript},
		{"run", "--slots", "1", "pool", "--", "sh", "-c", holdScript},
		{"run", "rw", "--", "sh", "-c", holdScript},
	} {
		p := start(t, env, args...)
		p.stdout.await(t, "ready")
		t.Cleanup(func() {
			p.release()
			p.expect(0)
		})
	}

	type result struct {
		code   int
		stderr string
	}
	run := func(env []string, args ...string) func(t *testing.T) result {
		return func(t *testing.T) result {
			code, _, stderr := redlockRun(t, env, args...)
			return result{code, stderr}
		}
	}
	// Names the user gave, which a message may repeat (see
	// cliTextProblems).
	given := map[string][]string{"reserved KEY": {"redlock:x"}}
	// Another exit code a case may have, by timing.
	also := map[string]int{"one server twice": exitConfig}
	cases := []struct {
		name string
		want int
		run  func(t *testing.T) result
	}{
		{"unknown command", exitUsage, run(nil, "frobnicate")},
		{"flag before the command", exitUsage, run(nil, "--ttl", "1s", "run")},
		{"missing KEY", exitUsage, run(env, "run", "--", "true")},
		{"reserved KEY", exitUsage, run(env, "run", "redlock:x", "--", "true")},
		{"former flag", exitUsage, run(env, "run", "--key", "f", "k", "--", "true")},
		{"no nodes", exitUsage, run(nil, "run", "k", "--", "true")},
		{"bad URL", exitUsage, run(nil, "run", "--nodes", "redis://h:1/x", "k", "--", "true")},
		{"bad TTL", exitUsage, run(env, "run", "--ttl", "-1s", "k", "--", "true")},
		{"release without --force", exitUsage, run(env, "release", "k")},
		{"tls-cert without tls-key", exitUsage, run(env, "run", "--tls-cert", "c.pem", "k", "--", "true")},
		{"busy", exitBusy, run(env, "run", "busy", "--", "true")},
		{"busy, permit", exitBusy, run(env, "run", "--slots", "1", "pool", "--", "true")},
		{"busy, reader", exitBusy, run(env, "run", "--shared", "rw", "--", "true")},
		{"semaphore size", exitSize, run(env, "run", "--slots", "2", "pool", "--", "true")},
		{"nodes down, run", exitUnavailable, run(downEnv, "run", "--node-timeout", "200ms", "k", "--", "true")},
		// Waits past redlock.DefaultOutageLog: the warning of a long
		// outage, then the error.
		{"nodes down, a long wait", exitUnavailable, func(t *testing.T) result {
			p := start(t, downEnv, "run", "--node-timeout", "200ms", "--wait", "12s", "k", "--", "true")
			p.stderr.await(t, "warning: waiting out an outage")
			code := p.wait()
			return result{code, p.stderr.String()}
		}},
		{"nodes down, inspect", exitUnavailable, run(downEnv, "inspect", "--node-timeout", "200ms", "k")},
		{"nodes down, release", exitUnavailable, run(downEnv, "release", "--force", "--yes", "--node-timeout", "200ms", "k")},
		{"database out of range", exitConfig, run(nil, "run", "--nodes",
			strings.Join([]string{url(servers[0], "/99"), url(servers[1], "/99"), url(servers[2], "/99")}, ","), "k", "--", "true")},
		{"one address twice", exitUsage, run(nil, "run", "--nodes",
			strings.Join([]string{url(servers[0], ""), "redis://localhost:" + servers[0].Addr[strings.LastIndexByte(servers[0].Addr, ':')+1:], url(servers[2], "")}, ","), "k", "--", "true")},
		// A warning (the other two nodes are a majority), or, when the
		// round meets the second connection to the server, an error.
		{"one server twice", exitOK, run(nil, "run", "--nodes",
			strings.Join([]string{url(servers[0], ""), "redis://" + twice.Addr, url(servers[1], "")}, ","), "k", "--", "true")},
		{"TLS against plain TCP", exitConfig, run(nil, "run", "--node-timeout", "500ms", "--nodes",
			strings.Join([]string{"rediss://" + servers[0].Addr, "rediss://" + servers[1].Addr, "rediss://" + servers[2].Addr}, ","), "k", "--", "true")},
		{"restart guard before bootstrap", exitUnavailable, run(env, "run", "--restart-guard", "1m", "g", "--", "true")},
		{"command not found", exitNotFound, run(env, "run", "nf", "--", "no-such-command-here")},
		{"force-released while running", exitLost, func(t *testing.T) result {
			key := "forced"
			p := start(t, env, "run", "--ttl", "3s", "--node-timeout", "1s", "--wait", "20s", key, "--", "sh", "-c", `echo ready; exec sleep 60`)
			p.stdout.await(t, "ready")
			if code, _, stderr := redlockRun(t, env, "release", "--force", "--yes", key); code != 0 {
				t.Fatalf("release: %d\n%s", code, stderr)
			}
			code := p.wait()
			p.stderr.await(t, "force-released")
			return result{code, p.stderr.String()}
		}},
		{"release finds the lock gone", exitOK, func(t *testing.T) result {
			key := "gone"
			p := start(t, env, "run", key, "--", "sh", "-c", holdScript)
			p.stdout.await(t, "ready")
			if code, _, stderr := redlockRun(t, env, "release", "--force", "--yes", key); code != 0 {
				t.Fatalf("release: %d\n%s", code, stderr)
			}
			p.release()
			code := p.wait()
			p.stderr.await(t, "warning: releasing")
			return result{code, p.stderr.String()}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.run(t)
			t.Logf("exit %d, stderr:\n%s", got.code, got.stderr)
			if got.code != c.want && got.code != also[c.name] {
				t.Errorf("exit %d, want %d", got.code, c.want)
			}
			for _, p := range cliTextProblems(got.stderr, given[c.name]...) {
				t.Error(p)
			}
		})
	}
}

// cliTextProblems finds each rule broken, and nothing in a good text.
func TestCLITextRules(t *testing.T) {
	for _, bad := range []string{
		"redlock run: invalid argument: INVALID semaphore \"s1\" has size 3, not 5\n",
		"redlock run: lock \"k\": nodes abstain: ABSTAIN node lost its memory\n",
		"redlock run: obtain \"redlock:sem:s1\": busy\n",
		"redlock run: lock lost: redlock: lock not held: expired\n",
		"redlock run: lock \"k\": busy: busy: held\n",
		"redlock run: a message\nbroken over two lines\n",
		"",
	} {
		if len(cliTextProblems(bad)) == 0 {
			t.Errorf("no problem found in %q", bad)
		}
	}
	good := "redlock run: missing KEY before \"--\"\nusage: redlock run [flags] KEY -- COMMAND [ARGS]\nRun \"redlock run --help\" for more.\n" +
		"redlock: unknown command \"x\"\n" + "redlock run: KEY \"redlock:x\" starts with \"redlock:\"\n"
	if p := cliTextProblems(good, "redlock:x"); len(p) > 0 {
		t.Errorf("problems found in good texts: %q", p)
	}
}
