package transport

// How a run's clients speak to servers, as the command line set it: what
// they trust and prove in TLS, whether they resume TLS sessions, and
// whether they ask for compressed responses.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Config is how every client of a run speaks to servers (--insecure, --ca,
// --cert and --key, --no-tls-resume, --no-compression). The zero value is
// what browsers do: certificates checked against the system's roots, TLS
// sessions resumed on a user's next connection, compressed responses asked
// for and decoded. It travels to agents as it is (JSON).
type Config struct {
	Insecure bool   `json:"insecure,omitempty"` // do not check the server's certificate
	CA       []byte `json:"ca,omitempty"`       // PEM certificates trusted in place of the system's roots
	Cert     []byte `json:"cert,omitempty"`     // PEM certificate chain shown to a server that asks (mTLS)
	Key      []byte `json:"key,omitempty"`      // Cert's PEM private key
	// NoResume: every connection makes a full TLS handshake. By default a
	// user keeps its TLS sessions (a cache of its own, as each browser
	// has) and resumes them on its next connection to the same server.
	NoResume bool `json:"no_resume,omitempty"`
	// NoCompression: no Accept-Encoding is sent (a response compressed
	// anyway is still decoded).
	NoCompression bool `json:"no_compression,omitempty"`
	// HTTP1: HTTP/1.1 even where an https server offers HTTP/2. By default
	// users offer h2 by ALPN, as browsers do, and speak what the server
	// picks.
	HTTP1 bool `json:"http1,omitempty"`
	// H2C: HTTP/2 with prior knowledge on http:// targets (cleartext,
	// RFC 9113 3.3), for servers that speak only that there.
	H2C bool `json:"h2c,omitempty"`
}

// Settings is a Config made ready once for all of a run's clients: its
// certificates parsed.
type Settings struct {
	tls      *tls.Config // never changed once made: clients clone it
	resume   bool
	compress bool
	http1    bool
	h2c      bool
}

// defaults is Options.Settings when it is nil.
var defaults, _ = Config{}.Settings()

// Settings parses c's certificates. Its errors say which one is wrong.
func (c Config) Settings() (*Settings, error) {
	t := &tls.Config{InsecureSkipVerify: c.Insecure, MinVersion: tls.VersionTLS12}
	if len(c.CA) > 0 {
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(c.CA) {
			return nil, errors.New("--ca: no PEM certificate in it (want a file of -----BEGIN CERTIFICATE----- blocks)")
		}
	}
	switch {
	case len(c.Cert) > 0 && len(c.Key) > 0:
		pair, err := tls.X509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("--cert and --key: %w", err)
		}
		t.Certificates = []tls.Certificate{pair}
	case len(c.Cert) > 0:
		return nil, errors.New("--cert needs --key, the certificate's private key")
	case len(c.Key) > 0:
		return nil, errors.New("--key needs --cert, the certificate it is the key of")
	}
	if c.HTTP1 && c.H2C {
		return nil, errors.New("--http1 and --h2c: choose one")
	}
	return &Settings{tls: t, resume: !c.NoResume, compress: !c.NoCompression, http1: c.HTTP1, h2c: c.H2C}, nil
}

// TLS is the TLS configuration clients start from, for a client that is
// not this package's (user.ws's dialer clones it): do not change it.
// A nil Settings is the defaults'.
func (s *Settings) TLS() *tls.Config {
	if s == nil {
		s = defaults
	}
	return s.tls
}

// userTLS is one user's TLS configuration: the run's, with a session cache
// of the user's own when sessions are resumed.
func (s *Settings) userTLS() *tls.Config {
	if !s.resume {
		return s.tls
	}
	t := s.tls.Clone()
	t.ClientSessionCache = tls.NewLRUClientSessionCache(8)
	return t
}
