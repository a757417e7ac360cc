package agents

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// pair runs the handshake on a link whose agent→coordinator frames pass
// through tamper (nil: untouched) and returns both sides' sealed streams.
func pair(t *testing.T, tamper func(f *Frame) []*Frame) (agent, coord Stream) {
	t.Helper()
	l := newLink()
	t.Cleanup(l.cut)
	type accepted struct {
		s   Stream
		err error
	}
	done := make(chan accepted, 1)
	go func() {
		_, s, err := Accept(linkEnd{l: l}, []byte(testToken), func(Hello) (Welcome, error) { return Welcome{Index: 1}, nil })
		done <- accepted{s, err}
	}()
	_, a, err := Greet(linkEnd{l: l, agent: true}, []byte(testToken), Hello{Name: "a", Cores: 1})
	c := <-done
	if err != nil || c.err != nil {
		t.Fatalf("handshake: agent %v, coordinator %v", err, c.err)
	}
	if tamper != nil {
		a = &onPath{Stream: a, l: l, tamper: tamper}
	}
	return a, c.s
}

// onPath is someone on the path after the handshake: each sealed frame
// the agent sends goes through tamper, which says what crosses instead.
type onPath struct {
	Stream
	l      *link
	tamper func(f *Frame) []*Frame
}

func (p *onPath) Send(f *Frame) error {
	wire := &capture{}
	p.Stream.(*sealed).s = wire // what the agent's seal puts on the wire
	if err := p.Stream.Send(f); err != nil {
		return err
	}
	p.Stream.(*sealed).s = linkEnd{l: p.l, agent: true}
	for _, g := range wire.frames {
		for _, h := range p.tamper(g) {
			if err := (linkEnd{l: p.l, agent: true}).Send(h); err != nil {
				return err
			}
		}
	}
	return nil
}

type capture struct {
	Stream
	frames []*Frame
}

func (c *capture) Send(f *Frame) error { c.frames = append(c.frames, f); return nil }

// Every frame after the handshake is sealed: one that arrives as sent is
// taken; one altered, replayed, dropped (the next then out of order),
// swapped for another of the same stream, or made up by someone who
// relayed the handshake but has not the token, is refused.
func TestSealedFramesRefuseTampering(t *testing.T) {
	status := &Frame{Kind: KindStatus, Body: []byte(`{"users":3}`)}
	var kept *Frame
	for _, c := range []struct {
		name   string
		tamper func(f *Frame) []*Frame
	}{
		{"a byte of the body altered", func(f *Frame) []*Frame { g := *f; g.Body = bytes.Clone(f.Body); g.Body[2] ^= 1; return []*Frame{&g} }},
		{"the kind changed", func(f *Frame) []*Frame { g := *f; g.Kind = KindDone; return []*Frame{&g} }},
		{"Seq changed", func(f *Frame) []*Frame { g := *f; g.Seq++; return []*Frame{&g} }},
		{"replayed", func(f *Frame) []*Frame { return []*Frame{f, f} }},
		{"one dropped", func(f *Frame) []*Frame {
			if kept == nil {
				kept = f
				return nil
			}
			return []*Frame{f}
		}},
		{"made up with another key", func(f *Frame) []*Frame {
			forged := seal(&capture{}, sessionKey([]byte("a guess"), nil, nil, ""), "agent")
			_ = forged.Send(&Frame{Kind: KindStatus, Body: []byte(`{"error":"run this"}`)})
			return forged.s.(*capture).frames
		}},
		{"unsealed", func(f *Frame) []*Frame { return []*Frame{{Kind: f.Kind, Seq: f.Seq, Body: []byte(`{"users":3}`)}} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			kept = nil
			a, coord := pair(t, c.tamper)
			for range 2 {
				if err := a.Send(status); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			for range 2 {
				if _, err = coord.Recv(); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrTampered) {
				t.Errorf("the coordinator read %v, want ErrTampered", err)
			}
		})
	}
	a, coord := pair(t, func(f *Frame) []*Frame { return []*Frame{f} })
	for i := range 3 {
		if err := a.Send(&Frame{Kind: KindSnapshot, Seq: uint64(i), Body: []byte("abc")}); err != nil {
			t.Fatal(err)
		}
		f, err := coord.Recv()
		if err != nil || f.Kind != KindSnapshot || f.Seq != uint64(i) || string(f.Body) != "abc" {
			t.Fatalf("frame %d as sent: %+v, %v", i, f, err)
		}
	}
}

// A body longer than a part crosses in parts, each sealed, and comes out
// whole; one longer than maxFrame is not sent, and parts that add up to
// more are refused before they are all held.
func TestSealedLongFramesGoInParts(t *testing.T) {
	var parts int
	a, coord := pair(t, func(f *Frame) []*Frame {
		if len(f.Body) > partSize+macSize {
			t.Errorf("a frame of %d bytes on the wire", len(f.Body))
		}
		parts++
		return []*Frame{f}
	})
	body := bytes.Repeat([]byte("0123456789"), (3*partSize+partSize/2)/10)
	go func() { _ = a.Send(&Frame{Kind: KindStart, Seq: 9, Body: body}) }()
	f, err := coord.Recv()
	if err != nil || f.Kind != KindStart || f.Seq != 9 || !bytes.Equal(f.Body, body) {
		t.Fatalf("a %d-byte frame: %v, %d bytes back", len(body), err, len(f.Body))
	}
	if parts != 4 {
		t.Errorf("%d frames on the wire, want 4 (3 parts and the rest)", parts)
	}
	if err := a.Send(&Frame{Kind: KindStart, Body: make([]byte, maxFrame+1)}); err == nil {
		t.Error("a frame longer than maxFrame was sent")
	}
	// A sender that keeps sending parts is cut off at maxFrame.
	l := newLink()
	defer l.cut()
	in := seal(linkEnd{l: l}, []byte("k"), "coordinator")
	out := seal(linkEnd{l: l, agent: true}, []byte("k"), "agent")
	go func() {
		out.sendMu.Lock()
		defer out.sendMu.Unlock()
		for range maxFrame/partSize + 1 {
			if out.send(KindPart, 0, make([]byte, partSize)) != nil {
				return
			}
		}
	}()
	if _, err := in.Recv(); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("parts past maxFrame: %v, want refused", err)
	}
}

// Over a real gRPC stream: before the handshake a peer cannot send a
// message past maxMessage (gRPC refuses it before holding it), while
// after it a frame of several parts crosses.
func TestGRPCLimitHoldsBeforeTheHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions()...)
	got := make(chan []byte, 1)
	Register(srv, func(s Stream) error {
		_, sealed, err := Accept(s, []byte(testToken), func(Hello) (Welcome, error) { return Welcome{}, nil })
		if err != nil {
			return err
		}
		f, err := sealed.Recv()
		if err != nil {
			return err
		}
		got <- f.Body
		return nil
	})
	go srv.Serve(ln)
	defer srv.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	s, err := Join(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil { // the challenge
		t.Fatal(err)
	}
	err = s.Send(&Frame{Kind: KindHello, Body: make([]byte, 2*partSize)})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a 2 MiB hello: %v, want refused as too large", err)
	}

	s, err = Join(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	_, s, err = Greet(s, []byte(testToken), Hello{Name: "a", Cores: 1})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte{7}, 5*partSize/2)
	if err := s.Send(&Frame{Kind: KindSnapshot, Body: body}); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, body) {
		t.Errorf("a %d-byte frame after the handshake came out as %d bytes", len(body), len(b))
	}
}
