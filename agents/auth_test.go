package agents

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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

// Every field of the hello and the welcome is under its side's proof:
// someone on the path of a --plaintext link who changes one (an agent's
// Cores, which decide its share of the users; its place; its lease) makes
// the handshake fail, the side that checks it saying the token does not
// match or the message was altered (the agent told so by a coordinator
// that refused its hello), and the agent take no work.
func TestHandshakeFieldsAreUnderTheProof(t *testing.T) {
	hello := func(fn func(h *Hello)) func(*Frame) {
		return func(f *Frame) {
			if f.Kind == KindHello {
				var h Hello
				json.Unmarshal(f.Body, &h)
				fn(&h)
				f.Body, _ = json.Marshal(h)
			}
		}
	}
	welcome := func(fn func(w *Welcome)) func(*Frame) {
		return func(f *Frame) {
			if f.Kind == KindWelcome {
				var w Welcome
				json.Unmarshal(f.Body, &w)
				fn(&w)
				f.Body, _ = json.Marshal(w)
			}
		}
	}
	const helloAltered, welcomeAltered = "the agent's token does not match the coordinator's (--token-file), or its hello was altered on the way",
		"the coordinator's token does not match the agent's (--token-file), or its welcome was altered on the way"
	for _, c := range []struct {
		name     string
		toCoord  func(*Frame) // the agent's frames, on their way
		toAgent  func(*Frame) // the coordinator's
		resuming bool
		want     string
	}{
		{name: "hello: version", toCoord: hello(func(h *Hello) { h.Version = "v9.9.9" }), want: helloAltered},
		{name: "hello: name", toCoord: hello(func(h *Hello) { h.Name = "someone-else" }), want: helloAltered},
		{name: "hello: cores", toCoord: hello(func(h *Hello) { h.Cores = 64 }), want: helloAltered},
		{name: "hello: proto", toCoord: hello(func(h *Hello) { h.Proto++ }), want: helloAltered},
		{name: "hello: resume", toCoord: hello(func(h *Hello) { h.Resume = "another-session" }), resuming: true, want: helloAltered},
		{name: "hello: resume dropped", toCoord: hello(func(h *Hello) { h.Resume = "" }), resuming: true, want: helloAltered},
		{name: "welcome: index", toAgent: welcome(func(w *Welcome) { w.Index = 0 }), want: welcomeAltered},
		{name: "welcome: session", toAgent: welcome(func(w *Welcome) { w.Session = "known-to-me" }), want: welcomeAltered},
		{name: "welcome: lease", toAgent: welcome(func(w *Welcome) { w.Lease = time.Hour }), want: welcomeAltered},
		{name: "welcome: resumed", toAgent: welcome(func(w *Welcome) { w.Resumed = !w.Resumed }), want: welcomeAltered},
	} {
		t.Run(c.name, func(t *testing.T) {
			toCoord, toAgent := c.toCoord, c.toAgent
			if toCoord == nil {
				toCoord = func(*Frame) {}
			}
			if toAgent == nil {
				toAgent = func(*Frame) {}
			}
			w, agentErr, coordErr := relayHandshake(toCoord, toAgent, c.resuming)
			if !errors.Is(agentErr, ErrRefused) || !strings.Contains(agentErr.Error(), c.want) {
				t.Errorf("the agent: %v (welcome %+v); want refused, saying %q", agentErr, w, c.want)
			}
			// A hello altered is refused by the coordinator; a welcome
			// altered, by the agent after the coordinator sent it.
			if c.toCoord != nil && (!errors.Is(coordErr, ErrRefused) || !strings.Contains(coordErr.Error(), c.want)) {
				t.Errorf("the coordinator: %v; want refused, saying %q", coordErr, c.want)
			}
		})
	}
	if w, agentErr, coordErr := relayHandshake(func(*Frame) {}, func(*Frame) {}, true); agentErr != nil || coordErr != nil || w.Index != 3 || !w.Resumed {
		t.Errorf("relayed faithfully: %+v, agent %v, coordinator %v; want resumed in place 3", w, agentErr, coordErr)
	}
}

// relayHandshake runs a handshake over a link on whose way toCoord may
// change the agent's frames and toAgent the coordinator's; the agent
// resumes session "mine" if resuming. The coordinator places it as index 3.
func relayHandshake(toCoord, toAgent func(*Frame), resuming bool) (Welcome, error, error) {
	l := newLink()
	defer l.cut()
	accepted := make(chan error, 1)
	go func() {
		_, _, err := Accept(rewrite{linkEnd{l: l}, toCoord}, []byte(testToken), func(h Hello) (Welcome, error) {
			return Welcome{Index: 3, Session: "s-3", Lease: 5 * time.Second, Resumed: h.Resume != ""}, nil
		})
		accepted <- err
	}()
	h := Hello{Version: "test", Name: "a", Cores: 2}
	if resuming {
		h.Resume = "mine"
	}
	w, _, err := Greet(rewrite{linkEnd{l: l, agent: true}, toAgent}, []byte(testToken), h)
	if err != nil {
		l.hangUp() // the coordinator may wait for a hello that never came
	}
	return w, err, <-accepted
}

// Each side meets one of a release before the proofs covered every field
// with a message that says which to upgrade, not that the token does not
// match: an agent's hello of before (Proto protoSealed, its proof of the
// old form), and a coordinator's challenge of before (no Proto).
func TestHandshakeTellsWhichSideToUpgrade(t *testing.T) {
	_, agentErr, coordErr := relayHandshake(func(f *Frame) {
		if f.Kind == KindHello {
			var h Hello
			json.Unmarshal(f.Body, &h)
			h.Proto = protoSealed
			f.Body, _ = json.Marshal(h)
		}
	}, func(*Frame) {}, false)
	const agentOld = "this agent's headroom (test) predates the coordinator's handshake, whose proofs cover every field: upgrade the agent to the coordinator's release"
	if !errors.Is(coordErr, ErrRefused) || !strings.Contains(coordErr.Error(), agentOld) || !strings.Contains(fmt.Sprint(agentErr), agentOld) {
		t.Errorf("an agent of before: coordinator %v, agent %v; want both to say %q", coordErr, agentErr, agentOld)
	}
	_, agentErr, coordErr = relayHandshake(func(*Frame) {}, func(f *Frame) {
		if f.Kind == KindChallenge {
			f.Body = []byte(fmt.Sprintf(`{"nonce":%q}`, base64.StdEncoding.EncodeToString(make([]byte, nonceSize))))
		}
	}, false)
	const coordOld = "the coordinator's headroom predates this agent's (test) handshake, whose proofs cover every field: upgrade the coordinator to the agent's release"
	if !errors.Is(agentErr, ErrRefused) || !strings.Contains(agentErr.Error(), coordOld) || !strings.Contains(fmt.Sprint(coordErr), coordOld) {
		t.Errorf("a coordinator of before: agent %v, coordinator %v; want both to say %q", agentErr, coordErr, coordOld)
	}
}
