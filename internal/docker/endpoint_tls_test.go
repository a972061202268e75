package docker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/internal/engine"
)

// clientCert makes a self-signed client certificate and its key, PEM.
func clientCert(t *testing.T) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pml-test-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), cert
}

func TestAContextsTLSFilesAreUsed(t *testing.T) {
	// A daemon on loopback that requires a client certificate, as
	// `dockerd --tlsverify` does; the context holds the CA, the cert and
	// the key (docker context create --docker ca=...,cert=...,key=...).
	certPEM, keyPEM, cert := clientCert(t)
	srv := httptest.NewUnstartedServer(&vmDaemon{info: map[string]any{"Name": "tls"}})
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	defer srv.Close()
	host := "tcp://" + strings.TrimPrefix(srv.URL, "https://")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	ep := engine.Endpoint{Host: host, Source: engine.FromEnvContext, Context: "tls", TLS: &engine.TLS{CA: ca, Cert: certPEM, Key: keyPEM}}
	rt, err := Open(ep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if info, err := rt.Info(context.Background()); err != nil || info.ServerVersion != "28.0.0" {
		t.Fatalf("Info over TLS = %+v, %v", info, err)
	}

	// Without the client certificate the daemon refuses the handshake.
	ep.TLS = &engine.TLS{CA: ca}
	rt2, err := Open(ep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt2.Close()
	if _, err := rt2.Info(context.Background()); err == nil {
		t.Fatal("a daemon that requires a client certificate answered without one")
	}

	// A CA file that holds no certificate is an error naming it.
	ep.TLS = &engine.TLS{CA: []byte("not PEM"), Dir: "/cfg/contexts/tls/x/docker"}
	if _, err := Open(ep, Options{}); err == nil || !strings.Contains(err.Error(), "/cfg/contexts/tls/x/docker/ca.pem") {
		t.Fatalf("bad ca.pem: %v", err)
	}
}

func TestDockerHostKeepsTheTLSEnvironment(t *testing.T) {
	// DOCKER_HOST with DOCKER_CERT_PATH and DOCKER_TLS_VERIFY, as docker
	// reads them: ca.pem, cert.pem and key.pem in that directory.
	certPEM, keyPEM, cert := clientCert(t)
	srv := httptest.NewUnstartedServer(&vmDaemon{info: map[string]any{"Name": "tls"}})
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	for name, b := range map[string][]byte{
		"ca.pem":   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		"cert.pem": certPEM, "key.pem": keyPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("DOCKER_HOST", "tcp://"+strings.TrimPrefix(srv.URL, "https://"))
	t.Setenv("DOCKER_CERT_PATH", dir)
	t.Setenv("DOCKER_TLS_VERIFY", "1")
	t.Setenv("DOCKER_CONTEXT", "")
	rt, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, err := rt.Info(context.Background()); err != nil {
		t.Fatalf("Info with DOCKER_CERT_PATH: %v", err)
	}
}

func TestAnSSHEndpointOpensWithoutConnecting(t *testing.T) {
	// docker's ssh helper runs `ssh` only when the first request is made.
	rt, err := Open(engine.Endpoint{Host: "ssh://me@build.invalid", Source: engine.FromFlag}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
}
