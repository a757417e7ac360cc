package agents

import (
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// testToken is the token of the tests' agents and coordinators.
const testToken = "b4e1f07c9a3d52e8a6c0d1f93b7e2a45"

// link is an in-memory stream between an agent and its coordinator, a
// network a test can break: frames sent and not yet received when it is
// cut are lost with it, as in a connection a proxy resets. The
// coordinator's side ending it (end) is no cut: what it sent first
// arrives, as gRPC delivers a handler's messages before its status.
type link struct {
	up, down  chan *Frame   // agent → coordinator, coordinator → agent
	gone      chan struct{} // closed when cut
	agentGone chan struct{} // closed when cut, or cut on the agent's side only
	over      chan struct{} // closed when the coordinator's side ended
	hungUp    chan struct{} // closed when the agent's side ended
	once      sync.Once
	agentOnce sync.Once
	overOnce  sync.Once
	hangOnce  sync.Once

	mu sync.Mutex
	// breakAt, if set, cuts the link as the frame it picks passes (up:
	// from the agent), the frame lost; once.
	breakAt func(f *Frame, up bool) bool
	sent    []*Frame // what the agent sent, lost frames too
	got     []*Frame // what the coordinator sent, lost frames too
}

// errCut is what either end reads once the link is cut: gRPC's word for a
// connection that closed.
var errCut = status.Error(codes.Unavailable, "the link was cut")

// errEnded is what the agent reads once the coordinator's side ended.
var errEnded = status.Error(codes.Unavailable, "the coordinator's side ended the stream")

func newLink() *link {
	return &link{up: make(chan *Frame, 1024), down: make(chan *Frame, 1024), gone: make(chan struct{}), agentGone: make(chan struct{}), over: make(chan struct{}), hungUp: make(chan struct{})}
}

// end is the coordinator's side returning: the stream ends once the
// agent has read what was sent.
func (l *link) end() { l.overOnce.Do(func() { close(l.over) }) }

// hangUp is the agent's side returning: the coordinator reads what the
// agent sent (a refusal, say) before it reads the link cut, as a real
// stream delivers what was written before it closed.
func (l *link) hangUp() { l.hangOnce.Do(func() { close(l.hungUp) }) }

// cut breaks the link for both ends.
func (l *link) cut() {
	l.once.Do(func() { close(l.gone) })
	l.cutAgent()
}

// cutAgent breaks the link on the agent's side only: the coordinator
// sees its stream open still (a connection half open).
func (l *link) cutAgent() { l.agentOnce.Do(func() { close(l.agentGone) }) }

// breakOn cuts the link as a frame of kind k passes in direction up.
func (l *link) breakOn(k Kind, up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.breakAt = func(f *Frame, u bool) bool { return f.Kind == k && u == up }
}

// linkEnd is one end of a link, the agent's or the coordinator's.
type linkEnd struct {
	l     *link
	agent bool
}

func (e linkEnd) ends() (gone <-chan struct{}, in, out chan *Frame) {
	if e.agent {
		return e.l.agentGone, e.l.down, e.l.up
	}
	return e.l.gone, e.l.up, e.l.down
}

func (e linkEnd) Send(f *Frame) error {
	gone, _, out := e.ends()
	select {
	case <-gone:
		return errCut
	case <-e.l.over:
		return errEnded
	default:
	}
	l := e.l
	l.mu.Lock()
	if e.agent {
		l.sent = append(l.sent, f)
	} else {
		l.got = append(l.got, f)
	}
	brk := l.breakAt != nil && l.breakAt(f, e.agent)
	if brk {
		l.breakAt = nil
	}
	l.mu.Unlock()
	if brk {
		l.cut() // the sender learns of it with its next frame
		return nil
	}
	select {
	case out <- f:
		return nil
	case <-gone:
		return errCut
	}
}

func (e linkEnd) Recv() (*Frame, error) {
	gone, in, _ := e.ends()
	select {
	case <-gone:
		return nil, errCut
	case <-e.l.over:
		if !e.agent {
			return nil, errEnded
		}
	default:
	}
	select {
	case f := <-in:
		return f, nil
	case <-gone:
		return nil, errCut
	case <-e.l.hungUp:
		if e.agent {
			return nil, errCut
		}
		select { // the coordinator reads what was sent before the hang-up first
		case f := <-in:
			return f, nil
		default:
			return nil, errCut
		}
	case <-e.l.over:
		if !e.agent {
			return nil, errEnded
		}
		select { // the agent reads what was sent before the end first
		case f := <-in:
			return f, nil
		default:
			return nil, errEnded
		}
	}
}

// unsealed is the body of a frame a link saw after the handshake: on the
// wire its seal follows it (seal.go). The frames of these tests are
// shorter than a part.
func unsealed(f *Frame) []byte { return f.Body[:len(f.Body)-macSize] }
