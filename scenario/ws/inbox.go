package ws

import "sync"

// inboxSize bounds the messages a user's connections hold for its handlers; a message that finds the
// inbox full is dropped and counted (Client.Dropped).
const inboxSize = 256

// inbox holds a user's WebSocket messages for their handlers, in arrival order, up to inboxSize.
// Its room grows as messages wait (4, 8, ... 256) and is given back when a burst has been handled,
// so an idle user holds a few words, not 256 pointers (2.3 KB; docs/BENCHMARKS.md).
type inbox struct {
	mu      sync.Mutex
	ring    []*Message
	head, n int
	wake    chan struct{} // holds a token while messages wait: the engine's pause selects on it
}

func newInbox() *inbox { return &inbox{wake: make(chan struct{}, 1)} }

// put adds m, or reports false when the inbox is full. Called from connections' reader goroutines.
func (in *inbox) put(m *Message) bool {
	in.mu.Lock()
	if in.n == inboxSize {
		in.mu.Unlock()
		return false
	}
	if in.n == len(in.ring) {
		ring := make([]*Message, min(max(2*len(in.ring), 4), inboxSize))
		for i := range in.n {
			ring[i] = in.ring[(in.head+i)%len(in.ring)]
		}
		in.ring, in.head = ring, 0
	}
	in.ring[(in.head+in.n)%len(in.ring)] = m
	in.n++
	in.mu.Unlock()
	select {
	case in.wake <- struct{}{}:
	default: // a token already waits
	}
	return true
}

// take returns the oldest message waiting, or nil.
func (in *inbox) take() *Message {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.n == 0 {
		return nil
	}
	m := in.ring[in.head]
	in.ring[in.head] = nil
	in.head = (in.head + 1) % len(in.ring)
	in.n--
	if in.n == 0 && len(in.ring) > 16 {
		in.ring, in.head = nil, 0 // the burst is over: its room goes back
	}
	return m
}

// len is the number of messages waiting.
func (in *inbox) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.n
}
