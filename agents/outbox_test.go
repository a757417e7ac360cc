package agents

import (
	"math/rand/v2"
	"testing"
)

// Snapshots pass through a link that drops frames and acknowledgements at
// random and breaks now and then; the agent resends what was not
// acknowledged after each break. Every snapshot is merged exactly once, in
// order, and the agent ends holding nothing the coordinator merged.
func TestOutboxLosesNothingAndCountsOnce(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		var out outbox
		var in inbox
		var merged []uint64
		deliver := func(f *Frame) {
			if r.IntN(4) == 0 { // lost on the way
				return
			}
			ok, err := in.fresh(f)
			if err != nil {
				return // after a loss the stream is broken; resent later
			}
			if ok {
				merged = append(merged, f.Seq)
			}
			if r.IntN(4) != 0 { // the acknowledgement arrives
				out.ack(in.merged)
			}
		}
		const n = 200
		for range n {
			deliver(out.add(KindSnapshot, []byte("s")))
			if r.IntN(10) == 0 { // the stream breaks: a new one resends
				for _, f := range out.unacked() {
					deliver(f)
				}
			}
		}
		for len(out.unacked()) > 0 { // the end: resend until all is acknowledged
			for _, f := range out.unacked() {
				deliver(f)
			}
		}
		if len(merged) != n {
			t.Fatalf("seed %d: merged %d snapshots, want %d", seed, len(merged), n)
		}
		for i, s := range merged {
			if s != uint64(i+1) {
				t.Fatalf("seed %d: merged %v, want 1..%d once each in order", seed, merged, n)
			}
		}
	}
}

func TestInboxRefusesAGap(t *testing.T) {
	var in inbox
	if ok, err := in.fresh(&Frame{Seq: 1}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := in.fresh(&Frame{Seq: 3}); err == nil || err.Error() != "agents: snapshot 3 came before 2: an agent lost snapshots it was never acknowledged for" {
		t.Errorf("a gap: %v", err)
	}
}
