package agents

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The handshake (docs/AGENTS.md, "Security"): each side proves it knows
// the shared token by answering the other's random challenge with an
// HMAC-SHA256 under the token, so the token never crosses the wire and an
// answer is good for one stream only. The roles are in what is signed, so
// an answer cannot be reflected back to the side that asked.
//
//	coordinator → agent   challenge {nonce_c}
//	agent → coordinator   hello {nonce_a, mac_a = HMAC(token, "agent", nonce_c, nonce_a), name, cores}
//	coordinator → agent   welcome {mac_c = HMAC(token, "coordinator", nonce_a, nonce_c), index, session, lease}
//
// An agent takes no work before it has checked mac_c: a coordinator that
// cannot prove the token could make it run any code.
//
// An agent whose stream broke during the run resumes its place on a new
// stream with the same handshake, its hello naming the session its welcome
// gave it (resume); both answers then cover the session too
// (HMAC(token, role, theirs, ours, session)), so a resume proves the token
// as a join does, and an answer for one session is no answer for another.
// Nothing else changes on the wire: the fields are new and optional, and a
// join's answers are those of before.

// nonceSize is the size of a challenge, in bytes.
const nonceSize = 32

// Challenge is the coordinator's first frame.
type Challenge struct {
	Nonce []byte `json:"nonce"`
}

// Hello is an agent's answer to the challenge, and what it tells of itself.
type Hello struct {
	Nonce   []byte `json:"nonce"` // the agent's challenge to the coordinator
	MAC     []byte `json:"mac"`
	Version string `json:"version"` // headroom's version
	Name    string `json:"name"`    // host or pod name, for the result
	Cores   int    `json:"cores"`   // GOMAXPROCS: users are split by it
	// Resume, if set, is the session of the place this agent held until
	// its stream broke: it takes it up again, its users still running,
	// rather than join as a new agent. Covered by MAC.
	Resume string `json:"resume,omitempty"`
	// Proto is the frames of the run the agent speaks beyond the first
	// ones: protoOpen for the open model's; 0 (absent) in an agent of before.
	Proto int `json:"proto,omitempty"`
}

// Welcome is the coordinator's answer: its proof, and the agent's place.
type Welcome struct {
	MAC   []byte `json:"mac"`
	Index int    `json:"index"` // the agent's number in the run, from 0
	// Session names the agent's place for a resume (Hello.Resume): random,
	// and known only to the agent and the coordinator. Empty from a
	// coordinator that cannot resume an agent.
	Session string `json:"session,omitempty"`
	// Lease is how long the coordinator keeps the place of an agent it
	// has not heard from, its users counted as running: the time an agent
	// whose stream broke has to resume.
	Lease time.Duration `json:"lease,omitempty"`
	// Resumed says the coordinator took the agent back in its place
	// (Hello.Resume), not as a new agent.
	Resumed bool `json:"resumed,omitempty"`
}

// Refused ends a stream with the reason the other side was not trusted.
type Refused struct {
	Reason string `json:"reason"`
	Later  bool   `json:"later,omitempty"` // no place now: an agent may try again
}

// ErrRefused is returned when the other side refused this one, or failed to prove the token.
var ErrRefused = errors.New("refused")

// ErrLater is wrapped, beside ErrRefused, when the coordinator had no
// place for the agent now (the run holds every agent it can): a place may
// free up, when an agent is lost.
var ErrLater = errors.New("no place now")

// prove is role's answer to the challenge theirs, with its own nonce ours,
// for the resume of session (empty for a join: the answer is then the one
// headroom has always given). The nonces are of a fixed size, so what
// follows them cannot be read as part of them.
func prove(token []byte, role string, theirs, ours []byte, session string) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("headroom agents v1 " + role + "\x00"))
	m.Write(theirs)
	m.Write(ours)
	m.Write([]byte(session))
	return m.Sum(nil)
}

func nonce() []byte {
	b := make([]byte, nonceSize)
	rand.Read(b) // never fails (crypto/rand)
	return b
}

// send sends a control message as a frame of kind k.
func send(s Stream, k Kind, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.Send(&Frame{Kind: k, Body: body})
}

// recv receives the next frame, which must be of kind k, into v. A
// Refused frame is an ErrRefused with its reason.
func recv(s Stream, k Kind, v any) error {
	f, err := s.Recv()
	if err != nil {
		return err
	}
	if f.Kind == KindRefused {
		var r Refused
		_ = json.Unmarshal(f.Body, &r)
		if r.Later {
			return fmt.Errorf("%w (%w): %s", ErrRefused, ErrLater, r.Reason)
		}
		return fmt.Errorf("%w: %s", ErrRefused, r.Reason)
	}
	if f.Kind != k {
		return fmt.Errorf("agents: got a %s frame, want %s", f.Kind, k)
	}
	if err := json.Unmarshal(f.Body, v); err != nil {
		return fmt.Errorf("agents: a bad %s frame: %v", k, err)
	}
	return nil
}

// refuse tells the other side why, then returns the error for this side.
func refuse(s Stream, why string) error {
	_ = send(s, KindRefused, Refused{Reason: why})
	return fmt.Errorf("%w: %s", ErrRefused, why)
}

// refuseFor refuses with err's text, and says whether to try again later.
func refuseFor(s Stream, err error) error {
	why := err.Error()
	if !errors.Is(err, ErrLater) {
		return refuse(s, why)
	}
	_ = send(s, KindRefused, Refused{Reason: why, Later: true})
	return fmt.Errorf("%w: %s", ErrRefused, why)
}

// Accept is the coordinator's side of the handshake on s. It returns the
// agent's Hello once the agent has proved it knows token (and, for a
// resume, the session it names); place then gives the agent its Welcome
// (its index, or the place it resumes; an error refuses it). Every frame
// after the welcome goes through the returned stream, sealed.
func Accept(s Stream, token []byte, place func(Hello) (Welcome, error)) (Hello, Stream, error) {
	mine := nonce()
	if err := send(s, KindChallenge, Challenge{Nonce: mine}); err != nil {
		return Hello{}, nil, err
	}
	var h Hello
	if err := recv(s, KindHello, &h); err != nil {
		return Hello{}, nil, err
	}
	if len(h.Nonce) != nonceSize || !hmac.Equal(h.MAC, prove(token, "agent", mine, h.Nonce, h.Resume)) {
		return Hello{}, nil, refuse(s, "the agent's token does not match the coordinator's (--token-file)")
	}
	if h.Proto < protoSealed {
		return Hello{}, nil, refuse(s, fmt.Sprintf("this agent's headroom (%s) predates sealed frames, which the coordinator requires: upgrade it", h.Version))
	}
	w, err := place(h)
	if err != nil {
		return Hello{}, nil, refuseFor(s, err)
	}
	w.MAC = prove(token, "coordinator", h.Nonce, mine, h.Resume)
	if err := send(s, KindWelcome, w); err != nil {
		return h, nil, err
	}
	return h, seal(s, sessionKey(token, mine, h.Nonce, h.Resume), "coordinator"), nil
}

// Greet is the agent's side of the handshake on s: it answers the
// coordinator's challenge with h (its nonce and proof filled in here) and
// returns the Welcome once the coordinator has proved it knows token, and
// the stream every later frame goes through, sealed.
func Greet(s Stream, token []byte, h Hello) (Welcome, Stream, error) {
	w, key, err := handshake(s, token, h)
	if err != nil {
		return Welcome{}, nil, err
	}
	return w, seal(s, key, "agent"), nil
}

// handshake is Greet's handshake; it returns the Welcome and the session key.
func handshake(s Stream, token []byte, h Hello) (Welcome, []byte, error) {
	h.Proto = max(h.Proto, protoSealed) // the frames after it are sealed
	var c Challenge
	if err := recv(s, KindChallenge, &c); err != nil {
		return Welcome{}, nil, err
	}
	if len(c.Nonce) != nonceSize {
		return Welcome{}, nil, refuse(s, "a challenge of the wrong size")
	}
	h.Nonce = nonce()
	h.MAC = prove(token, "agent", c.Nonce, h.Nonce, h.Resume)
	if err := send(s, KindHello, h); err != nil {
		return Welcome{}, nil, err
	}
	var w Welcome
	if err := recv(s, KindWelcome, &w); err != nil {
		return Welcome{}, nil, err
	}
	if !hmac.Equal(w.MAC, prove(token, "coordinator", h.Nonce, c.Nonce, h.Resume)) {
		return Welcome{}, nil, refuse(s, "the coordinator's token does not match the agent's (--token-file)")
	}
	if h.Resume != "" && !w.Resumed {
		return Welcome{}, nil, refuse(s, "the coordinator took a resuming agent as a new one")
	}
	return w, sessionKey(token, c.Nonce, h.Nonce, h.Resume), nil
}
