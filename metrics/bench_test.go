package metrics

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// agentSamples is a second of an agent: 30,000 samples of names request
// names (log-uniform from 100 µs to 2 s), in a random order.
func agentSamples(r *rand.Rand, names int) []Sample {
	var out []Sample
	for i := range names {
		name := "GET /api/v1/things/" + strconv.Itoa(i)
		for range 30_000 / names {
			out = append(out, Sample{Name: name, Status: 200, BytesIn: 500, BytesOut: 200,
				Latency: time.Duration(100e3 * math.Pow(2e4, r.Float64()))})
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// BenchmarkRecord: one op is one sample recorded into a shard, drained
// (untimed) once a second's worth: 30,000 samples of 10 or 1,000 names.
func BenchmarkRecord(b *testing.B) {
	for _, names := range []int{10, 1000} {
		for _, phases := range []bool{false, true} {
			b.Run("names="+strconv.Itoa(names)+"/phases="+strconv.FormatBool(phases), func(b *testing.B) { benchRecord(b, names, phases) })
		}
	}
}

// benchRecord records samples of names names, with their wait and
// receive timed when phases.
func benchRecord(b *testing.B, names int, phases bool) {
	samples := agentSamples(rand.New(rand.NewPCG(1, 1)), names)
	if phases {
		for i := range samples {
			x := &samples[i]
			x.Timed = 1<<PhaseWait | 1<<PhaseReceive
			x.Phases[PhaseWait], x.Phases[PhaseReceive] = x.Latency*9/10, x.Latency/10
		}
	}
	rec := NewRecorder(1, nil, time.Now)
	shard, into := rec.Shard(0), NewSnapshot()
	b.ResetTimer()
	for i := range b.N {
		j := i % len(samples)
		if j == 0 && i > 0 {
			b.StopTimer()
			into.Reset()
			rec.Drain(into)
			b.StartTimer()
		}
		shard.Record(samples[j])
	}
}

// BenchmarkDrain: one op is an agent's Drain of a second of 1,000 names
// recorded into 2 shards.
func BenchmarkDrain(b *testing.B) {
	samples := agentSamples(rand.New(rand.NewPCG(1, 1)), 1000)
	rec := NewRecorder(2, nil, time.Now)
	into := NewSnapshot()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for i, x := range samples {
			rec.Shard(i).Record(x)
		}
		into.Reset()
		b.StartTimer()
		rec.Drain(into)
	}
}
