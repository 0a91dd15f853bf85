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
	certFile, keyFile = writePEM(t, t.TempDir(), "server", der, key)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// CAFiles are the PEM files of a private certificate authority and of a
// server's and a client's certificates it signed, with their keys.
type CAFiles struct {
	CA                    string
	ServerCert, ServerKey string // for 127.0.0.1
	ClientCert, ClientKey string
}

// PrivateCAT makes a certificate authority, a server certificate for
// 127.0.0.1 and a client certificate, both signed by it, as PEM files in
// a temporary directory of t's.
func PrivateCAT(t testing.TB) CAFiles {
	t.Helper()
	dir := t.TempDir()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	var out CAFiles
	out.CA, _ = writePEM(t, dir, "ca", caDER, caKey)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		k := newKey()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return writePEM(t, dir, name, der, k)
	}
	out.ServerCert, out.ServerKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	out.ClientCert, out.ClientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return out
}

// writePEM writes a certificate (der) and its key as PEM files name.crt
// and name.key in dir.
func writePEM(t testing.TB, dir, name string, der []byte, key *ecdsa.PrivateKey) (certFile, keyFile string) {
	t.Helper()
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
