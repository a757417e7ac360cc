package agents

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// coordinator serves Join on a loopback port, accepting agents with token
// and placing each as index 7; it returns the address and what each
// accepted stream's handshake ended with.
func coordinator(t *testing.T, token string) (string, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions()...)
	ended := make(chan error, 10)
	Register(srv, func(s Stream) error {
		_, _, err := Accept(s, []byte(token), func(h Hello) (Welcome, error) {
			if h.Name == "unwanted" {
				return Welcome{}, errors.New("no room for unwanted")
			}
			return Welcome{Index: 7}, nil
		})
		ended <- err
		return err
	})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), ended
}

// greet joins the coordinator at addr as an agent named name with token.
func greet(t *testing.T, addr, token, name string) (Welcome, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Join(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := Greet(s, []byte(token), Hello{Version: "test", Name: name, Cores: 2})
	return w, err
}

// Over a real gRPC stream on loopback: an agent with the coordinator's token
// is welcomed (and told its index); one with another token is refused, and
// says why on both sides; and an agent refuses a coordinator that cannot
// prove the token, so it never takes work from it.
func TestHandshake(t *testing.T) {
	addr, ended := coordinator(t, "s3cret")

	w, err := greet(t, addr, "s3cret", "agent-1")
	if err != nil || w.Index != 7 {
		t.Fatalf("the right token: %+v, %v; want welcomed as index 7", w, err)
	}
	if err := <-ended; err != nil {
		t.Fatalf("the coordinator's side of a good handshake: %v", err)
	}

	_, err = greet(t, addr, "guess", "agent-2")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "token does not match") {
		t.Errorf("a wrong token: the agent got %v; want refused, saying the token does not match", err)
	}
	if err := <-ended; !errors.Is(err, ErrRefused) {
		t.Errorf("a wrong token: the coordinator's side ended with %v; want refused", err)
	}

	_, err = greet(t, addr, "s3cret", "unwanted")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no room for unwanted") {
		t.Errorf("an agent the coordinator does not place: %v; want refused with its reason", err)
	}
	<-ended
}

// An impostor coordinator (a server that does not know the token) cannot
// make an agent accept it, even by replaying an answer it saw: the agent's
// nonce is new each time.
func TestAgentRefusesAnImpostor(t *testing.T) {
	real, _ := coordinator(t, "s3cret")
	// The impostor relays the real coordinator's challenge to record an
	// agent's answer... then replays a recorded welcome to a new agent.
	var recorded *Frame
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions()...)
	Register(srv, func(s Stream) error {
		conn, err := grpc.NewClient(real, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		up, err := Join(context.Background(), conn)
		if err != nil {
			return err
		}
		c, err := up.Recv() // the real challenge
		if err != nil {
			return err
		}
		if recorded != nil { // second agent: replay the recorded welcome
			s.Send(c)
			if _, err := s.Recv(); err != nil {
				return err
			}
			return s.Send(recorded)
		}
		for _, hop := range []struct{ from, to Stream }{{nil, s}, {s, up}, {up, s}} {
			f := c
			if hop.from != nil {
				if f, err = hop.from.Recv(); err != nil {
					return err
				}
			}
			if f.Kind == KindWelcome {
				recorded = f
			}
			hop.to.Send(f)
		}
		return nil
	})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	if _, err := greet(t, ln.Addr().String(), "s3cret", "first"); err != nil {
		t.Fatalf("relayed faithfully, the first handshake should pass: %v", err)
	}
	_, err = greet(t, ln.Addr().String(), "s3cret", "second")
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "coordinator's token does not match") {
		t.Errorf("a replayed welcome: %v; want the agent to refuse the coordinator", err)
	}
}

// Frames survive the codec, and a frame too short is an error.
func TestCodec(t *testing.T) {
	var c codec
	b, err := c.Marshal(&Frame{Kind: KindSnapshot, Seq: 1 << 40, Body: []byte("abc")})
	if err != nil {
		t.Fatal(err)
	}
	var f Frame
	if err := c.Unmarshal(b, &f); err != nil || f.Kind != KindSnapshot || f.Seq != 1<<40 || string(f.Body) != "abc" {
		t.Errorf("round trip: %+v, %v", f, err)
	}
	for _, bad := range [][]byte{nil, {1}, {1, 0x80}} {
		if err := c.Unmarshal(bad, &f); err == nil {
			t.Errorf("%v decoded", bad)
		}
	}
}

// rewrite is a stream whose received frames fn may change: a man in the
// middle.
type rewrite struct {
	Stream
	fn func(*Frame)
}

func (r rewrite) Recv() (*Frame, error) {
	f, err := r.Stream.Recv()
	if err == nil {
		r.fn(f)
	}
	return f, err
}

// A resume's proofs cover the session it names: an agent resuming its
// own session is welcomed back, and a hello whose session was changed on
// the way (to take another agent's place) is refused, as a wrong token is.
func TestResumeProofCoversTheSession(t *testing.T) {
	resume := func(fn func(*Frame)) (Welcome, error, error) {
		l := newLink()
		defer l.cut()
		accepted := make(chan error, 1)
		go func() {
			_, _, err := Accept(rewrite{linkEnd{l: l}, fn}, []byte(testToken), func(h Hello) (Welcome, error) {
				return Welcome{Index: 3, Session: h.Resume, Resumed: true}, nil
			})
			accepted <- err
		}()
		w, _, err := Greet(linkEnd{l: l, agent: true}, []byte(testToken), Hello{Name: "a", Cores: 1, Resume: "mine"})
		return w, err, <-accepted
	}
	if w, err, acc := resume(func(*Frame) {}); err != nil || acc != nil || !w.Resumed || w.Index != 3 {
		t.Fatalf("a faithful resume: %+v, %v (coordinator: %v); want resumed in place 3", w, err, acc)
	}
	_, err, acc := resume(func(f *Frame) {
		if f.Kind == KindHello {
			var h Hello
			json.Unmarshal(f.Body, &h)
			h.Resume = "theirs"
			f.Body, _ = json.Marshal(h)
		}
	})
	if !errors.Is(acc, ErrRefused) || !strings.Contains(acc.Error(), "token does not match") || !errors.Is(err, ErrRefused) {
		t.Errorf("a resume whose session was changed on the way: coordinator %v, agent %v; want both refused", acc, err)
	}
}
