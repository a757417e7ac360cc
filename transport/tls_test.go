package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// insecure is the settings of --insecure.
func insecure(t *testing.T) *Settings {
	t.Helper()
	s, err := Config{Insecure: true}.Settings()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// certPEM is a certificate as PEM.
func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// issue makes a certificate for cn signed by parent (itself when nil: a
// CA), and its key, both as PEM; the certificate parsed too.
func issue(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, certPEM(der), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func get(t *testing.T, c *Client) Response {
	t.Helper()
	var r Response
	c.Do(&Request{Method: "GET", URL: "/"}, &r)
	return r
}

// TestPrivateCA: --ca's certificates are trusted in place of the system's,
// for a server whose certificate they signed and no other.
func TestPrivateCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	set, err := Config{CA: certPEM(srv.Certificate().Raw)}.Settings()
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(Options{Target: u, Settings: set})
	defer c.Close()
	if r := get(t, c); r.Err != nil || r.Status != 200 {
		t.Fatalf("with the server's CA: status %d, %v", r.Status, r.Err)
	}
	_, _, other, _ := issue(t, "another CA", nil, nil)
	set, _ = Config{CA: other}.Settings()
	c = NewClient(Options{Target: u, Settings: set})
	defer c.Close()
	if r := get(t, c); r.Err == nil || !strings.Contains(r.Err.Error(), "certificate") {
		t.Errorf("with another CA: status %d, %v; want a certificate error", r.Status, r.Err)
	}
}

// TestClientCertificate: a server that asks for a client certificate gets
// --cert's, and refuses a user without one.
func TestClientCertificate(t *testing.T) {
	ca, caKey, _, _ := issue(t, "clients' CA", nil, nil)
	_, _, cert, key := issue(t, "user", ca, caKey)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.TLS.PeerCertificates[0].Subject.CommonName))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	set, err := Config{Insecure: true, Cert: cert, Key: key}.Settings()
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(Options{Target: u, Settings: set})
	defer c.Close()
	if r := get(t, c); r.Err != nil || r.Status != 200 || string(r.Body) != "user" {
		t.Fatalf("with --cert: status %d, body %q, %v", r.Status, r.Body, r.Err)
	}
	c = NewClient(Options{Target: u, Settings: insecure(t)})
	defer c.Close()
	if r := get(t, c); r.Err == nil {
		t.Errorf("without a certificate: status %d, want the handshake refused", r.Status)
	}
}

// TestSessionResumption: a user's next connection resumes its TLS session
// (its own: another user's first does not), unless NoResume.
func TestSessionResumption(t *testing.T) {
	var resumed, full atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS.DidResume {
			resumed.Add(1)
		} else {
			full.Add(1)
		}
	}))
	srv.StartTLS()
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	for _, tc := range []struct {
		noResume      bool
		resumed, full int64
	}{{false, 2, 2}, {true, 0, 4}} {
		resumed.Store(0)
		full.Store(0)
		set, _ := Config{Insecure: true, NoResume: tc.noResume}.Settings()
		for range 2 { // two users, each connecting twice
			c := NewClient(Options{Target: u, Settings: set})
			for range 2 {
				if r := get(t, c); r.Err != nil {
					t.Fatal(r.Err)
				}
				c.Close() // the next request connects anew
			}
		}
		if resumed.Load() != tc.resumed || full.Load() != tc.full {
			t.Errorf("NoResume %v: %d resumed, %d full handshakes; want %d and %d", tc.noResume, resumed.Load(), full.Load(), tc.resumed, tc.full)
		}
	}
}

// TestConfigErrors: a wrong --ca, --cert or --key is refused, saying which.
func TestConfigErrors(t *testing.T) {
	_, _, cert, key := issue(t, "x", nil, nil)
	_, _, _, otherKey := issue(t, "y", nil, nil)
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{CA: []byte("not a certificate")}, "--ca: no PEM certificate"},
		{Config{Cert: cert}, "--cert needs --key"},
		{Config{Key: key}, "--key needs --cert"},
		{Config{Cert: cert, Key: otherKey}, "--cert and --key:"},
		{Config{Cert: key, Key: cert}, "--cert and --key:"},
	} {
		_, err := tc.c.Settings()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v", tc.want, err)
		}
	}
	if _, err := (Config{Cert: cert, Key: key, CA: cert}).Settings(); err != nil {
		t.Errorf("a good pair and CA: %v", err)
	}
}
