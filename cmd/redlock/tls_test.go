package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// --tls-ca trusts a private CA, --tls-cert and --tls-key present a client
// certificate to servers that require one.
func TestTLSFlags(t *testing.T) {
	t.Parallel()
	pki := redistest.PrivateCAT(t)
	ca, srvCert, srvKey, cliCert, cliKey := pki.CA, pki.ServerCert, pki.ServerKey, pki.ClientCert, pki.ClientKey
	var urls []string
	for range 3 {
		port, err := redistest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		redistest.StartT(t, 1, redistest.Options{Args: []string{
			"--tls-port", strconv.Itoa(port), "--tls-cert-file", srvCert, "--tls-key-file", srvKey,
			"--tls-ca-cert-file", ca, "--tls-auth-clients", "yes",
		}})
		urls = append(urls, "rediss://127.0.0.1:"+strconv.Itoa(port))
	}
	nodes := strings.Join(urls, ",")
	tlsArgs := []string{"--tls-ca", ca, "--tls-cert", cliCert, "--tls-key", cliKey, "--node-timeout", "2s"}

	code, stdout, stderr := redlockRun(t, nil, append(append([]string{"run", "--nodes", nodes}, tlsArgs...), "k", "--", "echo", "ran")...)
	if code != 0 || stdout != "ran" {
		t.Errorf("run over TLS with a private CA and a client certificate: code %d, stdout %q\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = redlockRun(t, nil, append(append([]string{"inspect", "--nodes", nodes}, tlsArgs...), "k")...)
	if code != 0 || !strings.Contains(stdout, "not held") {
		t.Errorf("inspect over TLS: code %d\n%s\n%s", code, stdout, stderr)
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"no client certificate", []string{"--tls-ca", ca}},
		{"CA not trusted", []string{"--tls-cert", cliCert, "--tls-key", cliKey}},
	} {
		args := append(append([]string{"run", "--nodes", nodes, "--node-timeout", "2s"}, tt.args...), "k", "--", "echo", "ran")
		if code, stdout, stderr := redlockRun(t, nil, args...); code != exitUnavailable || stdout != "" {
			t.Errorf("%s: code %d, stdout %q; want %d and no run\n%s", tt.name, code, stdout, exitUnavailable, stderr)
		}
	}

	for _, tt := range []struct {
		name  string
		nodes string
		args  []string
		code  int
		want  string
	}{
		{"cert without key", nodes, []string{"--tls-cert", cliCert}, exitUsage, "--tls-cert and --tls-key go together"},
		{"no rediss node", "redis://127.0.0.1:1", []string{"--tls-ca", ca}, exitUsage, "none is given"},
		{"missing CA file", nodes, []string{"--tls-ca", filepath.Join(t.TempDir(), "nope.pem")}, exitNoInput, "--tls-ca"},
		{"CA file without a certificate", nodes, []string{"--tls-ca", cliKey}, exitNoInput, "no PEM certificate"},
		{"key does not match", nodes, []string{"--tls-cert", cliCert, "--tls-key", srvKey}, exitNoInput, "--tls-cert"},
	} {
		args := append(append([]string{"run", "--nodes", tt.nodes}, tt.args...), "k", "--", "echo", "ran")
		if code, stdout, stderr := redlockRun(t, nil, args...); code != tt.code || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: code %d, stdout %q; want %d and %q\n%s", tt.name, code, stdout, tt.code, tt.want, stderr)
		}
	}
}

// Mistakes in the node URLs exit 78 at once, saying what is wrong: a
// database the servers do not have, rediss:// against plain ports and
// redis:// against TLS ports. doctor's fix for the TLS case names TLS.
func TestMistakesExitConfig(t *testing.T) {
	t.Parallel()
	servers := redistest.StartTLST(t, 3)
	var db, tlsToPlain, plainToTLS []string
	for _, s := range servers {
		db = append(db, "redis://"+s.Addr+"/99")
		tlsToPlain = append(tlsToPlain, "rediss://"+s.Addr+"?skip_verify=true")
		plainToTLS = append(plainToTLS, s.TLSAddr)
	}
	for _, tt := range []struct {
		name  string
		nodes []string
		want  string
	}{
		{"database out of range", db, "database index out of range"},
		{"rediss:// to a plain port", tlsToPlain, "TLS mismatch: the client speaks TLS (rediss://) and the server on this port does not"},
		{"redis:// to a TLS port", plainToTLS, "TLS mismatch: the server speaks TLS on this port and the client does not"},
	} {
		code, stdout, stderr := redlockRun(t, nil, "run", "--wait", "forever", "--nodes", strings.Join(tt.nodes, ","), "k", "--", "echo", "ran")
		if code != exitConfig || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: code %d, stdout %q; want %d and %q\n%s", tt.name, code, stdout, exitConfig, tt.want, stderr)
		}
	}
	_, stdout, stderr := redlockRun(t, nil, "doctor", "--clock-window", "0", "--nodes", strings.Join(tlsToPlain, ","))
	if !strings.Contains(stdout, "agree about TLS") {
		t.Errorf("doctor with rediss:// to plain ports: the fix does not name TLS:\n%s\n%s", stdout, stderr)
	}
}
