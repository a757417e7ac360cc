package ws

import "testing"

// The inbox keeps arrival order while it grows around a ring that has wrapped, refuses the
// message after inboxSize, and gives its room back once a burst has been taken.
func TestInboxGrowsInOrder(t *testing.T) {
	in := newInbox()
	msg := func(i int) *Message { return &Message{data: []byte{byte(i), byte(i >> 8)}} }
	id := func(m *Message) int { return int(m.data[0]) | int(m.data[1])<<8 }
	sent, got := 0, 0
	// Put 3, take 2, ...: the ring wraps before each growth.
	for {
		for range 3 {
			if in.put(msg(sent)) {
				sent++
			} else if in.len() != inboxSize {
				t.Fatalf("refused at %d waiting", in.len())
			} else {
				goto full
			}
		}
		for range 2 {
			if m := in.take(); m == nil || id(m) != got {
				t.Fatalf("took %v, want message %d", m, got)
			}
			got++
		}
	}
full:
	if in.len() != inboxSize || len(in.ring) != inboxSize {
		t.Fatalf("full at %d waiting, room %d; want %d", in.len(), len(in.ring), inboxSize)
	}
	select {
	case <-in.wake:
	default:
		t.Fatal("messages wait and no wake-up token")
	}
	for ; got < sent; got++ {
		if m := in.take(); m == nil || id(m) != got {
			t.Fatalf("took %v, want message %d", m, got)
		}
	}
	if m := in.take(); m != nil || in.ring != nil {
		t.Fatalf("empty inbox gave %v and holds room %d", m, len(in.ring))
	}
}
