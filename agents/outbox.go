package agents

import (
	"fmt"
	"slices"
)

// outbox keeps an agent's snapshot frames, numbered from 1, until the
// coordinator acknowledges them: after a broken stream the agent sends
// again everything not acknowledged, and the coordinator skips what it
// merged already (inbox), so a lost message loses nothing and a resent
// one counts once. An agent that can resume numbers its Done too, last,
// so that it hangs up only once its Done has arrived. Not safe for
// concurrent use.
type outbox struct {
	pending []*Frame // unacknowledged, in order
	last    uint64   // the last number given
}

// add numbers body, a frame of kind k, as the next and keeps it until
// acknowledged.
func (o *outbox) add(k Kind, body []byte) *Frame {
	o.last++
	f := &Frame{Kind: k, Seq: o.last, Body: body}
	o.pending = append(o.pending, f)
	return f
}

// ack drops the frames up to seq: the coordinator merged them.
func (o *outbox) ack(seq uint64) {
	i := 0
	for i < len(o.pending) && o.pending[i].Seq <= seq {
		o.pending[i] = nil
		i++
	}
	o.pending = o.pending[i:]
}

// unacked is what to send again on a new stream, in order: a copy, as
// acknowledgements may arrive while it is being sent.
func (o *outbox) unacked() []*Frame { return slices.Clone(o.pending) }

// inbox is the coordinator's record of one agent's snapshots (and its
// numbered Done): the number merged last, so that a frame sent again is
// merged only once.
type inbox struct{ merged uint64 }

// fresh reports whether f is the next snapshot to merge. A frame already
// merged is not (it was resent after a lost acknowledgement); a gap is an
// error: the agent skipped a number it never acknowledged.
func (in *inbox) fresh(f *Frame) (bool, error) {
	switch {
	case f.Seq <= in.merged:
		return false, nil
	case f.Seq != in.merged+1:
		return false, &gapError{want: in.merged + 1, got: f.Seq}
	}
	in.merged = f.Seq
	return true, nil
}

type gapError struct{ want, got uint64 }

func (e *gapError) Error() string {
	return fmt.Sprintf("agents: snapshot %d came before %d: an agent lost snapshots it was never acknowledged for", e.got, e.want)
}
