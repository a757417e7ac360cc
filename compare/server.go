package compare

import (
	"fmt"
	"math"

	"github.com/headroom-dev/headroom/result"
)

// ServerComparison compares what one scraped endpoint exposed: the i-th
// --scrape endpoint of each run, on both sides.
type ServerComparison struct {
	Base       string             `json:"base_instance"`
	New        string             `json:"new_instance"`
	Kind       string             `json:"kind"`
	CPU        Metric             `json:"cpu_cores"`
	Memory     Metric             `json:"memory_mb"`
	Goroutines Metric             `json:"goroutines"`
	Timings    []TimingComparison `json:"timings,omitempty"`
	// Database is, for a database exporter, its work a request of the
	// window (compareDatabase); SetupDatabase its work a user set up over
	// users' setup (bounded runs: from the start to the window).
	Database      []Metric `json:"database_per_request,omitempty"`
	SetupDatabase []Metric `json:"database_per_user_set_up,omitempty"`
}

// TimingComparison compares one server-side latency family (API time by
// handler, store time by method) item by item, and over all the items
// both sides have with one mix (Mix).
type TimingComparison struct {
	Title    string      `json:"title"`
	Metric   string      `json:"metric"`
	Mix      Metric      `json:"mix_mean_ms"`
	Items    []TimingRow `json:"items"`
	OnlyBase []string    `json:"only_base,omitempty"`
	OnlyNew  []string    `json:"only_new,omitempty"`
}

// TimingRow is one handler or method.
type TimingRow struct {
	Name      string  `json:"name"`
	BaseCount float64 `json:"base_count"`
	NewCount  float64 `json:"new_count"`
	Mean      Metric  `json:"mean_ms"`
	P99       Metric  `json:"p99_ms"`
}

// compareServers compares the endpoints every run of both sides scraped,
// by position.
func compareServers(base, new *Side, o Options, notes *[]string) []ServerComparison {
	n := math.MaxInt
	for _, s := range []*Side{base, new} {
		for _, r := range s.Runs {
			if r.Result.Server == nil {
				n = 0
				continue
			}
			n = min(n, len(r.Result.Server.Targets))
		}
	}
	var out []ServerComparison
	for i := range n {
		bt, nt := targets(base, i), targets(new, i)
		if bt[0].Kind != nt[0].Kind {
			*notes = append(*notes, fmt.Sprintf("scrape endpoint %d is a %s on base and a %s on new: not compared", i+1, bt[0].Kind, nt[0].Kind))
			continue
		}
		sc := ServerComparison{Base: bt[0].Instance, New: nt[0].Instance, Kind: bt[0].Kind,
			CPU:        Metric{Name: "CPU (cores, mean)", Unit: "cores"},
			Memory:     Metric{Name: "memory (MiB, mean)", Unit: "MiB"},
			Goroutines: Metric{Name: "goroutines (mean)"}}
		for _, f := range []struct {
			m *Metric
			v func(result.ServerWindow) float64
		}{
			{&sc.CPU, func(w result.ServerWindow) float64 { return w.CPUCoresMean }},
			{&sc.Memory, func(w result.ServerWindow) float64 { return w.MemoryMBMean }},
			{&sc.Goroutines, func(w result.ServerWindow) float64 { return w.GoroutinesMean }},
		} {
			for _, t := range bt {
				f.m.BaseRuns = append(f.m.BaseRuns, f.v(t.Window))
			}
			for _, t := range nt {
				f.m.NewRuns = append(f.m.NewRuns, f.v(t.Window))
			}
			f.m.Base, f.m.New = mean(f.m.BaseRuns), mean(f.m.NewRuns)
			f.m.judge(o)
		}
		sc.Timings = compareTimings(bt, nt, o)
		sc.Database = compareDatabase(i, "a request", windowWork(base, i), windowWork(new, i), o)
		sc.SetupDatabase = compareDatabase(i, "a user set up", setupWork(base, i), setupWork(new, i), o)
		out = append(out, sc)
	}
	return out
}

// windowWork is scrape endpoint i's database work over each run's
// window; nil for step runs, whose server window spans the levels' setups
// too while their requests are the held windows' (each level has its own).
func windowWork(s *Side, i int) []dbSpan {
	var out []dbSpan
	for _, r := range s.Runs {
		if r.Result.Step != nil {
			return nil
		}
		out = append(out, dbSpan{r.Result.Server.Targets[i].Window.Database, float64(r.Result.Totals.Count)})
	}
	return out
}

// setupWork is scrape endpoint i's database work over each run's users'
// setup, and the users set up; nil unless every run has it (a bounded run
// that reached its window).
func setupWork(s *Side, i int) []dbSpan {
	var out []dbSpan
	for _, r := range s.Runs {
		tg := r.Result.Server.Targets[i]
		if tg.Setup == nil || r.Result.Setup == nil {
			return nil
		}
		out = append(out, dbSpan{tg.Setup.Database, float64(r.Result.Setup.Users)})
	}
	return out
}

func targets(s *Side, i int) []result.ServerTarget {
	var out []result.ServerTarget
	for _, r := range s.Runs {
		out = append(out, r.Result.Server.Targets[i])
	}
	return out
}

// timingsOf indexes one family of each run: name -> per-run figures.
func timingsOf(ts []result.ServerTarget, metric string) []map[string]result.Timing {
	out := make([]map[string]result.Timing, len(ts))
	for i, t := range ts {
		out[i] = map[string]result.Timing{}
		for _, g := range t.Window.Timings {
			if g.Metric == metric {
				for _, it := range g.Items {
					out[i][it.Name] = it
				}
			}
		}
	}
	return out
}

func compareTimings(bt, nt []result.ServerTarget, o Options) []TimingComparison {
	families := map[string]string{}
	for _, t := range append(append([]result.ServerTarget{}, bt...), nt...) {
		for _, g := range t.Window.Timings {
			families[g.Metric] = g.Title
		}
	}
	var out []TimingComparison
	for _, fam := range sortedKeys(families) {
		out = append(out, compareFamily(fam, families[fam], timingsOf(bt, fam), timingsOf(nt, fam), o))
	}
	return out
}

// compareFamily compares one latency family's items both sides have,
// each and in one mix, and lists those one side alone has.
func compareFamily(fam, title string, b, n []map[string]result.Timing, o Options) TimingComparison {
	inB, inN := present(b), present(n)
	tc := TimingComparison{Title: title, Metric: fam, Mix: Metric{Name: "mean, common mix", Unit: "ms"}}
	var common []string
	for _, name := range sortedKeys(inB) {
		if inN[name] {
			common = append(common, name)
		} else {
			tc.OnlyBase = append(tc.OnlyBase, name)
		}
	}
	for _, name := range sortedKeys(inN) {
		if !inB[name] {
			tc.OnlyNew = append(tc.OnlyNew, name)
		}
	}
	if len(common) == 0 {
		return tc
	}
	for _, name := range common {
		row := TimingRow{Name: name, Mean: Metric{Name: "mean", Unit: "ms"}, P99: Metric{Name: "p99", Unit: "ms"}}
		row.BaseCount, row.Mean.Base, row.P99.Base, row.Mean.BaseRuns, row.P99.BaseRuns = pooledTiming(b, name)
		row.NewCount, row.Mean.New, row.P99.New, row.Mean.NewRuns, row.P99.NewRuns = pooledTiming(n, name)
		row.Mean.judge(o)
		row.P99.judge(o)
		tc.Items = append(tc.Items, row)
	}
	w := mixWeights(b, n, common)
	mix := func(run map[string]result.Timing) float64 {
		return weighted(w, func(name string) float64 {
			if t, ok := run[name]; ok {
				return t.MeanMs
			}
			return math.NaN()
		})
	}
	for _, run := range b {
		tc.Mix.BaseRuns = append(tc.Mix.BaseRuns, mix(run))
	}
	for _, run := range n {
		tc.Mix.NewRuns = append(tc.Mix.NewRuns, mix(run))
	}
	tc.Mix.Base, tc.Mix.New = mean(tc.Mix.BaseRuns), mean(tc.Mix.NewRuns)
	tc.Mix.judge(o)
	return tc
}

// mixWeights is one mix for both sides: each common item's weight the
// mean of its share of each side's requests to the common items.
func mixWeights(b, n []map[string]result.Timing, common []string) map[string]float64 {
	w := map[string]float64{}
	for _, side := range [][]map[string]result.Timing{b, n} {
		tot := 0.0
		for _, run := range side {
			for _, name := range common {
				tot += run[name].Count
			}
		}
		for _, run := range side {
			for _, name := range common {
				if tot > 0 {
					w[name] += run[name].Count / tot / 2
				}
			}
		}
	}
	return w
}

func present(runs []map[string]result.Timing) map[string]bool {
	out := map[string]bool{}
	for _, r := range runs {
		for n := range r {
			out[n] = true
		}
	}
	return out
}

// pooledTiming pools one item over the runs that have it: the count, the
// count-weighted mean, the mean of the runs' p99 (server histograms are
// not kept whole), and the per-run values.
func pooledTiming(runs []map[string]result.Timing, name string) (count, meanMs, p99 float64, means, p99s []float64) {
	sum := 0.0
	for _, r := range runs {
		t, ok := r[name]
		if !ok {
			continue
		}
		count += t.Count
		sum += t.MeanMs * t.Count
		means, p99s = append(means, t.MeanMs), append(p99s, t.P99Ms)
	}
	if count > 0 {
		meanMs = sum / count
	}
	return count, meanMs, mean(p99s), means, p99s
}
