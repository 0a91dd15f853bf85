package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestPasswordsNeverShown(t *testing.T) {
	t.Parallel()
	const (
		password = "s3cret-Pa55"
		wrong    = "wr0ng-Pa55"
		aclPass  = "acl-S3cret"
	)
	servers := redistest.StartT(t, 3, redistest.Options{})
	for _, s := range servers {
		c := s.NewClient()
		err := c.Do(t.Context(), "ACL", "SETUSER", "locker", "on", ">"+aclPass, "~*", "&*", "+@all").Err()
		if err == nil {
			err = c.ConfigSet(t.Context(), "requirepass", password).Err()
		}
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	withPass := func(user, pass string) string {
		urls := make([]string, len(servers))
		for i, s := range servers {
			urls[i] = fmt.Sprintf("redis://%s:%s@%s", user, pass, s.Addr)
		}
		return strings.Join(urls, ",")
	}
	secrets := []string{password, wrong, aclPass}

	tests := []struct {
		name  string
		env   []string
		args  []string
		code  int
		check string // in stderr
	}{
		{"right password", nil, []string{"run", "--verbose", "--nodes", withPass("", password), "k1", "--", "true"}, 0, "released"},
		{"ACL user", nil, []string{"run", "--verbose", "--nodes", withPass("locker", aclPass), "k2", "--", "true"}, 0, "released"},
		{"from the environment", []string{envNodes + "=" + withPass("", password)}, []string{"inspect", "k3"}, 0, ""},
		{"wrong password", nil, []string{"run", "--nodes", withPass("", wrong), "k4", "--", "true"}, 78, "WRONGPASS"},                    // EX_CONFIG
		{"wrong password, inspect", nil, []string{"inspect", "--nodes", withPass("", wrong), "k5"}, 78, "WRONGPASS"},                     // EX_CONFIG
		{"wrong password, json", nil, []string{"inspect", "--json", "--nodes", withPass("", wrong), "k5"}, 78, "WRONGPASS"},              // EX_CONFIG
		{"wrong password, release", nil, []string{"release", "--force", "--yes", "--nodes", withPass("", wrong), "k6"}, 78, "WRONGPASS"}, // EX_CONFIG
		{"wrong password, bootstrap", nil, []string{"bootstrap", "--nodes", withPass("", wrong)}, 78, "WRONGPASS"},                       // EX_CONFIG
		{"wrong password, doctor", nil, []string{"doctor", "--clock-window", "0", "--nodes", withPass("", wrong)}, exitUnavailable, ""},
		{"ACL user, doctor", nil, []string{"doctor", "--json", "--clock-window", "0", "--nodes", withPass("locker", aclPass)}, 1, ""},
		{"unreachable", nil, []string{"run", "--nodes", "redis://u:" + password + "@127.0.0.1:1", "k7", "--", "true"}, exitUnavailable, "127.0.0.1:1"},
		{"help with the environment", []string{envNodes + "=" + withPass("", password)}, []string{"run", "--help"}, 0, ""},
		{"bad port", nil, []string{"run", "--nodes", "redis://u:" + password + "@h:port", "k", "--", "true"}, exitUsage, "redis://xxxxx@h:port"},
		{"slash in password", nil, []string{"run", "--nodes", "redis://u:ab/" + password + "@h:1", "k", "--", "true"}, exitUsage, "redis://xxxxx@h:1"},
		{"hash in password", nil, []string{"run", "--nodes", "redis://u:" + password + "#x@h:1", "k", "--", "true"}, exitUsage, "malformed URL"},
		{"question mark in password", nil, []string{"run", "--nodes", "redis://u:" + password + "?@h:1", "k", "--", "true"}, exitUsage, "malformed URL"},
		{"no user", nil, []string{"run", "--nodes", "redis://" + password + "@h:port", "k", "--", "true"}, exitUsage, "redis://xxxxx@h:port"},
		{"bad scheme", nil, []string{"run", "--nodes", "http://u:" + password + "@h:1", "k", "--", "true"}, exitUsage, "http://xxxxx@h:1"},
		{"no scheme", nil, []string{"run", "--nodes", "u:" + password + "@h:1", "k", "--", "true"}, exitUsage, "not a URL"},
		{"password as an option", nil, []string{"run", "--nodes", "redis://h:1/?password=" + password, "k", "--", "true"}, exitUsage, "the query holds a password"},
		{"bad database", nil, []string{"run", "--nodes", "redis://u:" + password + "@h:1/x", "k", "--", "true"}, exitUsage, "invalid database number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := redlockRun(t, tt.env, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d\n%s", code, tt.code, stderr)
			}
			if !strings.Contains(stderr, tt.check) {
				t.Errorf("stderr does not contain %q:\n%s", tt.check, stderr)
			}
			for _, s := range secrets {
				if strings.Contains(stdout, s) || strings.Contains(stderr, s) {
					t.Errorf("output shows the password %q:\nstdout: %s\nstderr: %s", s, stdout, stderr)
				}
			}
		})
	}
}

// A password with an unencoded comma splits its URL in two; neither half is
// shown, nor a password that lost its "@host" and so reads as a port.
func TestPasswordFragmentsNeverShown(t *testing.T) {
	t.Parallel()
	const head, tail = "s3cret", "Pa55w0rd"
	tests := []struct {
		name  string
		nodes string
		check string // in stderr
	}{
		{"comma, no user", "redis://:" + head + "," + tail + "@h:1", "percent-encode a comma"},
		{"comma, user", "redis://u:" + head + "," + tail + "@h:1,redis://h:2", "percent-encode a comma"},
		{"comma, last node", "redis://h:2,redis://u:" + head + "," + tail + "@h:1", "item 3 of the node list is neither a URL nor host:port"},
		{"no host", "redis://:" + head + tail, "redis://:xxxxx"},
		{"no host, user", "redis://u:" + head + tail + "/0", "(redis://u:xxxxx)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, args := range [][]string{
				{"run", "--nodes", tt.nodes, "k", "--", "true"},
				{"hold", "--nodes", tt.nodes, "k"},
			} {
				code, stdout, stderr := redlockRun(t, nil, args...)
				if code != exitUsage || !strings.Contains(stderr, tt.check) {
					t.Errorf("%s: exit code %d, want %d, with %q in stderr:\n%s", args[0], code, exitUsage, tt.check, stderr)
				}
				for _, s := range []string{head, tail} {
					if strings.Contains(stdout+stderr, s) {
						t.Errorf("%s: output shows %q of the password:\nstdout: %s\nstderr: %s", args[0], s, stdout, stderr)
					}
				}
			}
		})
	}
}
