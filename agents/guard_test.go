package agents

import (
	"context"
	"net"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// rawCodec sends a body as it is, shared: the attack below costs the
// attacker one buffer, so what the heap holds is the coordinator's.
type rawCodec struct{}

func (rawCodec) Name() string                    { return "headroom-frame" }
func (rawCodec) Marshal(v any) ([]byte, error)   { return v.([]byte), nil }
func (rawCodec) Unmarshal(b []byte, v any) error { *(v.(*[]byte)) = b; return nil }

// heapBytes is the bytes of the heap's live and unswept objects.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Anyone who reaches a coordinator's port gets little before proving the
// token: hellos of 60 MiB are refused by their length, not held (the
// heap grows by far less than one of them while 16 are sent), and
// streams that take a challenge and never answer are cut at the
// handshake deadline, those past a connection's one handshake at once;
// an agent with the token joins meanwhile.
func TestUnauthenticatedPeersAreBounded(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 500 * time.Millisecond
	c, err := Listen("127.0.0.1:0", []byte(testToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(c.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	refuseBigHellos(t, ctx, dial)
	cutIdleStreams(t, ctx, c.Addr())
}

// refuseBigHellos sends 16 hellos of 60 MiB, each on a connection of
// dial's, and checks they are refused by their length, not held.
func refuseBigHellos(t *testing.T, ctx context.Context, dial func() *grpc.ClientConn) {
	big := make([]byte, 60<<20)
	big[0] = byte(KindHello)
	before := heapBytes()
	var peak uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, heapBytes())
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	refused := make(chan error, 16)
	for range 16 {
		conn := dial()
		wg.Go(func() {
			s, err := conn.NewStream(ctx, &joinDesc, "/"+service+"/Join", grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(len(big)+1))
			if err != nil {
				refused <- err
				return
			}
			err = s.SendMsg(big)
			var in []byte
			if err == nil {
				for err == nil {
					err = s.RecvMsg(&in) // the challenge, then the refusal
				}
			}
			refused <- err
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	for range 16 {
		if err := <-refused; status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a 60 MiB hello ended with %v, want refused as too large", err)
		}
	}
	if grew := int64(peak) - int64(before); grew > 32<<20 {
		t.Errorf("the heap grew by %d MiB while 16 hellos of 60 MiB were refused; want under 32 MiB", grew>>20)
	}
	t.Logf("heap: %d MiB before, %d MiB at most while 16 hellos of 60 MiB were refused", before>>20, peak>>20)
}

// cutIdleStreams opens streams to the coordinator at addr that take a
// challenge and never answer, and checks each is cut at the deadline or
// refused at once, while an agent with the token joins.
func cutIdleStreams(t *testing.T, ctx context.Context, addr string) {
	// Idle streams: 8 on each of 10 connections. On a connection that
	// has not proved the token, one stream at a time is in its handshake.
	start := time.Now()
	type end struct {
		err  error
		took time.Duration
	}
	ends := make(chan end, 80)
	for range 10 {
		conn := clientFrom(t, addr, "127.0.0.2")
		for range 8 {
			go func() {
				s, err := Join(ctx, conn)
				if err == nil {
					for err == nil {
						_, err = s.Recv()
					}
				}
				ends <- end{err, time.Since(start)}
			}()
		}
	}
	if _, err := greetWithToken(ctx, clientFrom(t, addr, "127.0.0.3"), testToken); err != nil {
		t.Errorf("an agent with the token beside 80 idle streams: %v", err)
	}
	turned, cut := 0, 0
	var last time.Duration
	for range 80 {
		e := <-ends
		if status.Code(e.err) == codes.Unavailable && strings.Contains(e.err.Error(), "under way on this connection") {
			turned++
			continue
		}
		cut++
		last = max(last, e.took)
	}
	if turned != 70 || cut != 10 {
		t.Errorf("80 idle streams on 10 connections: %d turned at once, %d cut at the deadline; want 70 and 10", turned, cut)
	}
	if last > 10*handshakeTimeout {
		t.Errorf("the last idle stream was cut %v after it opened; the deadline is %v", last, handshakeTimeout)
	}
	t.Logf("80 idle streams on 10 connections: %d turned at once, %d cut, the last after %v", turned, cut, last)
}

// greetWithToken joins as an agent over conn and returns its welcome,
// trying again as an agent does (Retry) for up to 10 s.
func greetWithToken(ctx context.Context, conn *grpc.ClientConn, token string) (Welcome, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := Join(ctx, conn)
		var w Welcome
		if err == nil {
			w, _, err = Greet(s, []byte(token), Hello{Version: "test", Name: "honest", Cores: 1})
		}
		if err == nil || !Retry(err) || time.Now().After(deadline) {
			return w, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialFrom dials from ip, a loopback address (Linux gives all of 127/8 to
// lo), counting its dials in n if n is not nil.
func dialFrom(ip string, n *atomic.Int64) func(context.Context, string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if n != nil {
			n.Add(1)
		}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// clientFrom is a gRPC client of addr whose connections leave from ip.
func clientFrom(t *testing.T, addr, ip string) *grpc.ClientConn {
	return clientCounted(t, addr, ip, nil)
}

// clientCounted is clientFrom, counting its dials in n.
func clientCounted(t *testing.T, addr, ip string, n *atomic.Int64) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dialFrom(ip, n)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// h2Preface is what an HTTP/2 client sends first: its preface and an
// empty SETTINGS frame. A stranger sends it and then nothing.
var h2Preface = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)

// stranger opens a connection to addr from ip that speaks HTTP/2's
// preface and nothing more. admitted says whether gRPC served it (its
// SETTINGS came) rather than it being closed at its accept; c is open
// if it was.
func stranger(addr, ip string) (c net.Conn, admitted bool, err error) {
	c, err = dialFrom(ip, nil)(context.Background(), addr)
	if err != nil {
		return nil, false, err
	}
	_, err = c.Write(h2Preface)
	n := 0
	if err == nil {
		c.SetReadDeadline(time.Now().Add(10 * time.Second)) // only if the machine stalls
		n, err = c.Read(make([]byte, 64))
		c.SetReadDeadline(time.Time{})
	}
	if n > 0 {
		return c, true, nil
	}
	c.Close()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return nil, false, err
	}
	return nil, false, nil // closed at once: EOF, or reset
}

// joinFrom joins as an agent over conn, trying again as an agent does
// (Retry) until ctx ends.
func joinFrom(ctx context.Context, conn *grpc.ClientConn, name string) (Welcome, error) {
	for {
		s, err := Join(ctx, conn)
		var w Welcome
		if err == nil {
			w, _, err = Greet(s, []byte(testToken), Hello{Version: "test", Name: name, Cores: 1})
		}
		if err == nil || !Retry(err) {
			return w, err
		}
		select {
		case <-ctx.Done():
			return w, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Over the network: with 127.0.0.1 holding its maxPerAddress strangers,
// one more from it is closed at its accept while one from 127.0.0.2 gets
// in; and an agent's connection from 127.0.0.1 that proved the token does
// not count against it (gRPC hands the guard the stream's connection).
func TestStrangersPerAddressOverTheNetwork(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = time.Hour // nothing expires here
	c, err := Listen("127.0.0.1:0", []byte(testToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := joinFrom(ctx, clientFrom(t, c.Addr(), "127.0.0.1"), "honest"); err != nil {
		t.Fatalf("an agent from 127.0.0.1: %v", err)
	}
	for i := range maxPerAddress {
		s, admitted, err := stranger(c.Addr(), "127.0.0.1")
		if err != nil || !admitted {
			t.Fatalf("stranger %d from 127.0.0.1 beside a proved agent: admitted %v, %v; want in", i+1, admitted, err)
		}
		defer s.Close()
	}
	if s, admitted, err := stranger(c.Addr(), "127.0.0.1"); err != nil || admitted {
		if s != nil {
			s.Close()
		}
		t.Errorf("stranger %d from 127.0.0.1: admitted %v, %v; want closed at its accept", maxPerAddress+1, admitted, err)
	}
	s, admitted, err := stranger(c.Addr(), "127.0.0.2")
	if err != nil || !admitted {
		t.Fatalf("a stranger from 127.0.0.2 while 127.0.0.1 holds its %d: admitted %v, %v; want in", maxPerAddress, admitted, err)
	}
	s.Close()
}
