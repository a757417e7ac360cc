package agents

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
)

// siege holds idle HTTP/2 connections open to a coordinator from several
// addresses, each renewed as soon as the coordinator closes it (a second
// later if it was closed at its accept), as the lockout a security review
// found did.
type siege struct {
	addr string
	stop chan struct{}
	wg   sync.WaitGroup
	up   sync.WaitGroup // each attacker's first connection tried

	mu       sync.Mutex
	admitted int           // strangers gRPC served
	closed   int           // of them, closed by the coordinator
	outlived int           // of them, still open 20 s after their dial
	refused  int           // closed at their accept
	failed   int           // dials that failed (the machine's ports, say)
	shortest time.Duration // the shortest life of one the coordinator closed, from its dial
	longest  time.Duration
}

func newSiege(addr string) *siege { return &siege{addr: addr, stop: make(chan struct{})} }

// from starts n attackers from ip.
func (s *siege) from(ip string, n int) {
	s.up.Add(n)
	for range n {
		s.wg.Go(func() { s.attack(ip) })
	}
}

func (s *siege) attack(ip string) {
	first := true
	for {
		dialed := time.Now()
		c, admitted, err := stranger(s.addr, ip)
		if first {
			s.up.Done()
			first = false
		}
		pause := time.Second
		switch {
		case err != nil:
			s.count(func() { s.failed++ })
		case !admitted:
			s.count(func() { s.refused++ })
		default:
			s.hold(c, dialed)
			pause = 10 * time.Millisecond
		}
		select {
		case <-s.stop:
			return
		case <-time.After(pause):
		}
	}
}

// hold waits for the coordinator to close c, up to 20 s from its dial
// (20 handshake timeouts here; the lockout held them a minute).
func (s *siege) hold(c net.Conn, dialed time.Time) {
	defer c.Close()
	c.SetReadDeadline(dialed.Add(20 * time.Second))
	b := make([]byte, 4096)
	var err error
	for err == nil {
		_, err = c.Read(b)
	}
	lived := time.Since(dialed)
	s.count(func() {
		s.admitted++
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			s.outlived++
			return
		}
		s.closed++
		if s.shortest == 0 || lived < s.shortest {
			s.shortest = lived
		}
		s.longest = max(s.longest, lived)
	})
}

func (s *siege) count(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// end stops renewing and waits for the last strangers to be closed.
func (s *siege) end() {
	close(s.stop)
	s.wg.Wait()
}

func (s *siege) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d strangers served, %d closed by the coordinator (lives %v to %v), %d open after 20 s; %d closed at accept; %d dials failed",
		s.admitted, s.closed, s.shortest.Round(time.Millisecond), s.longest.Round(time.Millisecond), s.outlived, s.refused, s.failed)
}

// The lockout a security review found: 1,024 idle HTTP/2 connections
// took every connection a coordinator would accept, and renewed as they
// closed they kept agents out. Here 1,100 idle connections from
// 127.0.0.1 and 24 from each of 8 other addresses (every stranger's place
// taken), renewed as they close: an agent from 127.0.0.2 still joins
// (within 30 s; the handshake timeout is 1 s), keeps its connection
// past that timeout, and every stranger the coordinator served is closed
// by it (at the timeout, or sooner when a newcomer from an address that
// held fewer took its place), none left open 20 s after its dial.
func TestIdleConnectionsCannotLockAgentsOut(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = time.Second // an honest handshake on a busy machine takes under 0.2 s
	c, err := Listen("127.0.0.1:0", []byte(testToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := newSiege(c.Addr())
	s.from("127.0.0.1", maxConns+76)
	for i := range 8 {
		s.from(fmt.Sprintf("127.0.0.%d", 10+i), 24)
	}
	s.up.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var dials atomic.Int64
	agent := clientCounted(t, c.Addr(), "127.0.0.2", &dials)
	start := time.Now()
	if _, err := joinFrom(ctx, agent, "honest"); err != nil {
		s.end()
		t.Fatalf("an agent from 127.0.0.2 under siege: %v after %v (siege: %v)", err, time.Since(start).Round(time.Millisecond), s)
	}
	took := time.Since(start)
	// Its connection proved the token: it is no stranger, and outlives
	// the handshake timeout, the siege going on (and once it is over, a
	// second join on it dials nothing new).
	joined := dials.Load()
	time.Sleep(3 * handshakeTimeout)
	state := agent.GetState()
	s.end()
	if _, err := joinFrom(ctx, agent, "honest-2"); err != nil {
		t.Errorf("a second join on the agent's connection: %v", err)
	}
	if n := dials.Load(); state != connectivity.Ready || n != joined {
		t.Errorf("the agent's connection, %v after it proved the token: %v, and %d dials (%d before); want it kept", 3*handshakeTimeout, state, n, joined)
	}
	t.Logf("the agent joined after %v; siege: %v", took.Round(time.Millisecond), s)
	if s.outlived > 0 || s.closed == 0 {
		t.Errorf("strangers: %d closed by the coordinator, %d still open 20 s after their dial; want all closed", s.closed, s.outlived)
	}
}

// Over TLS too, a connection whose stream proved the token is found by
// the guard (gRPC's stats handler, its two ends) and kept: past ten
// handshake timeouts it is open still, and a second join on it dials
// nothing new.
func TestProvedConnectionIsKeptOverTLS(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 200 * time.Millisecond
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	c, err := Listen("127.0.0.1:0", []byte(testToken), credentials.NewServerTLSFromCert(&tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var dials atomic.Int64
	agent, err := grpc.NewClient(c.Addr(), grpc.WithTransportCredentials(credentials.NewClientTLSFromCert(pool, "")), grpc.WithContextDialer(dialFrom("127.0.0.1", &dials)))
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := joinFrom(ctx, agent, "honest"); err != nil {
		t.Fatalf("an agent over TLS: %v", err)
	}
	time.Sleep(10 * handshakeTimeout)
	state := agent.GetState()
	if _, err := joinFrom(ctx, agent, "honest-2"); err != nil {
		t.Errorf("a second join over TLS: %v", err)
	}
	if n := dials.Load(); state != connectivity.Ready || n != 1 {
		t.Errorf("the agent's TLS connection, %v after it proved the token: %v; %d dials; want it kept, 1 dial", 10*handshakeTimeout, state, n)
	}
}
