package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TLSServer is a server that listens for TLS on TLSAddr besides plain TCP
// on Addr, with a certificate for 127.0.0.1 that Config trusts. It asks no
// client certificate.
type TLSServer struct {
	*Server
	TLSAddr string
	// Config is a client's TLS configuration for TLSAddr.
	Config *tls.Config
}

// StartTLST starts n servers with TLS for a test (see StartT), each with a
// self-signed certificate made for it.
func StartTLST(t testing.TB, n int) []*TLSServer {
	t.Helper()
	out := make([]*TLSServer, n)
	for i := range out {
		certFile, keyFile, pool := selfSigned(t)
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		s := StartT(t, 1, Options{Args: []string{
			"--tls-port", strconv.Itoa(port), "--tls-cert-file", certFile, "--tls-key-file", keyFile,
			"--tls-ca-cert-file", certFile, "--tls-auth-clients", "no",
		}})[0]
		out[i] = &TLSServer{Server: s, TLSAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}
	}
	return out
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key as
// PEM files in a temporary directory of t's, and returns a pool that
// trusts it.
func selfSigned(t testing.TB) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
