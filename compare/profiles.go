package compare

import (
	"fmt"
	"slices"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/serverprof"
)

// ProfileComparison is the server's CPU profile of one phase, base
// against new (--profile): the CPU a unit of work took (a user set up, a
// request), and the functions whose share of the CPU moved most.
type ProfileComparison struct {
	Target int    `json:"target"` // in the runs' profiles.targets
	Phase  string `json:"phase"`  // "setup" or "window"
	Unit   string `json:"unit"`
	// Binary is the profiled program's file name ("mariadbd",
	// "python3.11"): with several targets, what names each process.
	Binary string `json:"binary,omitempty"`
	// CPUPerUnit is each run's CPU per unit, in milliseconds.
	CPUPerUnit Metric `json:"cpu_per_unit_ms"`
	// HeapMB is the server's heap in use at the phase's end, in MB; nil
	// unless every run has it.
	HeapMB *Metric `json:"heap_mb,omitempty"`
	// Moved are the functions whose CPU per unit (in them and what they
	// called: a login's hash, a request's JSON encoding) moved most, in
	// milliseconds, most first: at most profileMoved, one of each chain
	// of functions that moved alike (see chains).
	Moved []Metric `json:"moved"`
	// Cause is the deepest function that carries most of the change: of
	// those whose CPU a unit moved by at least 90% of the most any did,
	// the one that spent least (an ancestor carries its callees' change,
	// so the least is the innermost: the hash, not the handler that calls
	// it). "" when nothing moved, or the CPU a unit did not change.
	Cause string `json:"cause,omitempty"`
	// Gone are the functions the base spent most in that the new build
	// never ran (a hash the new one replaced), one of each chain, at most
	// 3: in the base's ms a unit, most first.
	Gone []Metric `json:"gone,omitempty"`
	// SampledS is the CPU sampled on the side with less, in seconds: under
	// minSampled no cause is named, as a few samples (100 a second of
	// CPU) move by chance.
	SampledS float64 `json:"sampled_s"`
	// Flame is the differential flame graph's tree: each function's CPU a
	// unit (in it and what it called, ms), Value the new side's and Base
	// the base's, each the mean of its runs.
	Flame *result.Flame `json:"flame,omitempty"`
}

// minSampled is the least CPU sampled on each side for a cause to be named.
const minSampled = time.Second

// profileMoved is how many functions a phase's comparison lists.
const profileMoved = 10

// compareProfiles compares every phase each run of both sides profiled,
// target by target; notes say what could not be compared.
func compareProfiles(base, new *Side, o Options, notes *[]string) []ProfileComparison {
	var out []ProfileComparison
	for _, key := range profileKeys(base, new) {
		bp, berr := phaseRuns(base, key)
		np, nerr := phaseRuns(new, key)
		if err := firstErr(berr, nerr); err != nil {
			*notes = append(*notes, fmt.Sprintf("server CPU profile of %s, target %d: not compared: %v", key.phase, key.target+1, err))
			continue
		}
		if bp[0].binary != np[0].binary {
			*notes = append(*notes, fmt.Sprintf("server CPU profile of %s, target %d: not compared: the base profiled %q and the new %q, different programs",
				key.phase, key.target+1, bp[0].binary, np[0].binary))
			continue
		}
		pc := ProfileComparison{Target: key.target, Phase: key.phase, Unit: bp[0].unit, Binary: bp[0].binary,
			CPUPerUnit: Metric{Name: fmt.Sprintf("server CPU a %s (%s)", bp[0].unit, key.phase), Unit: "ms"}}
		for _, r := range bp {
			pc.CPUPerUnit.BaseRuns = append(pc.CPUPerUnit.BaseRuns, r.perUnit)
		}
		for _, r := range np {
			pc.CPUPerUnit.NewRuns = append(pc.CPUPerUnit.NewRuns, r.perUnit)
		}
		pc.CPUPerUnit.Base, pc.CPUPerUnit.New = meanOr(pc.CPUPerUnit.BaseRuns), meanOr(pc.CPUPerUnit.NewRuns)
		pc.CPUPerUnit.judge(o)
		pc.HeapMB = heapMetric(key.phase, bp, np, o)
		pc.Moved, pc.Gone, pc.Cause = movedFunctions(bp, np, o)
		pc.SampledS = min(sampled(bp), sampled(np)).Seconds()
		pc.Flame = diffFlame(bp, np)
		if pc.SampledS < minSampled.Seconds() || pc.CPUPerUnit.Verdict == NoChange {
			pc.Cause = "" // too few samples to tell, or no change to explain
		}
		out = append(out, pc)
	}
	nameProcesses(out)
	return out
}

// nameProcesses names each figure by its process when several were
// profiled (a server and its database): "mariadbd CPU a request
// (window)", so the verdicts say which process moved; by target and
// program where two targets run the same program.
func nameProcesses(pcs []ProfileComparison) {
	programs := map[string]map[int]bool{} // binary → its targets
	for _, pc := range pcs {
		if programs[pc.Binary] == nil {
			programs[pc.Binary] = map[int]bool{}
		}
		programs[pc.Binary][pc.Target] = true
	}
	targets := 0
	for _, ts := range programs {
		targets += len(ts)
	}
	if targets < 2 {
		return
	}
	for i := range pcs {
		pc := &pcs[i]
		name := ProcessName(pc.Target, pc.Binary, len(programs[pc.Binary]) > 1)
		pc.CPUPerUnit.Name = fmt.Sprintf("%s CPU a %s (%s)", name, pc.Unit, pc.Phase)
		if pc.HeapMB != nil {
			pc.HeapMB.Name = fmt.Sprintf("%s heap in use at the end (%s)", name, pc.Phase)
		}
	}
}

// ProcessName is how a profiled target is named: its program, or the
// target's number (from 1) with it where the program does not tell it
// from another target's (shared), or none is known.
func ProcessName(target int, binary string, shared bool) string {
	switch {
	case binary == "":
		return fmt.Sprintf("target %d", target+1)
	case shared:
		return fmt.Sprintf("target %d (%s)", target+1, binary)
	}
	return binary
}

type profileKey struct {
	target int
	phase  string
}

// profileKeys are the phases every run of both sides has a profile of.
func profileKeys(base, new *Side) []profileKey {
	count := map[profileKey]int{}
	runs := 0
	for _, s := range []*Side{base, new} {
		for _, r := range s.Runs {
			runs++
			if r.Result.Profiles == nil {
				continue
			}
			for _, ph := range r.Result.Profiles.Phases {
				if ph.File != "" {
					count[profileKey{ph.Target, ph.Phase}]++
				}
			}
		}
	}
	var keys []profileKey
	for k, n := range count {
		if n == runs {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b profileKey) int {
		if a.target != b.target {
			return a.target - b.target
		}
		return phaseOrder(a.phase) - phaseOrder(b.phase)
	})
	return keys
}

func phaseOrder(p string) int {
	if p == "setup" {
		return 0
	}
	return 1
}

// phaseRun is one run's profile of a phase, read from its merged file.
type phaseRun struct {
	cpu     time.Duration
	share   map[string]float64 // each function's cumulative CPU per unit, ms
	perUnit float64
	unit    string
	binary  string
	flame   *result.Flame // CPU seconds
	heapMB  float64       // in use at the end; -1 when unknown
}

func phaseRuns(s *Side, key profileKey) ([]phaseRun, error) {
	var out []phaseRun
	for _, r := range s.Runs {
		var ph *result.ProfilePhase
		for i := range r.Result.Profiles.Phases {
			if p := &r.Result.Profiles.Phases[i]; p.Target == key.target && p.Phase == key.phase {
				ph = p
			}
		}
		if ph == nil || ph.File == "" { // a result written by hand, or cut short
			return nil, fmt.Errorf("%s: no profile file of the %s phase of target %d", r.Dir, key.phase, key.target+1)
		}
		sum, err := serverprof.Read(r.Dir, ph.File)
		if err != nil {
			return nil, err
		}
		pr := phaseRun{cpu: sum.CPU, share: map[string]float64{}, perUnit: ph.PerUnitMs, unit: ph.Unit, binary: sum.Binary, flame: sum.Flame, heapMB: -1}
		if ph.Heap != nil {
			pr.heapMB = ph.Heap.InuseMB
		}
		for _, f := range sum.Funcs {
			if sum.CPU > 0 {
				pr.share[f.Name] = ph.PerUnitMs * float64(f.Cum) / float64(sum.CPU)
			}
		}
		out = append(out, pr)
	}
	return out, nil
}

// movedFunctions are the functions whose CPU per unit moved most between
// the sides (the mean of each side's runs), as metrics with intervals
// over the runs, a Go server's plumbing left out; and the cause (see
// ProfileComparison.Cause).
func movedFunctions(bp, np []phaseRun, o Options) (moved, gone []Metric, cause string) {
	var units []float64
	for _, r := range bp {
		units = append(units, r.perUnit)
	}
	baseUnit := meanOr(units) // the base's CPU a unit: what a function new in the new build is weighed against
	names := map[string]bool{}
	for _, rs := range [][]phaseRun{bp, np} {
		for _, r := range rs {
			for n := range r.share {
				names[n] = true
			}
		}
	}
	var ms []Metric
	for n := range names {
		if serverprof.Plumbing(n) {
			continue
		}
		m := Metric{Name: n, Unit: "ms"}
		for _, r := range bp {
			m.BaseRuns = append(m.BaseRuns, r.share[n])
		}
		for _, r := range np {
			m.NewRuns = append(m.NewRuns, r.share[n])
		}
		m.Base, m.New = meanOr(m.BaseRuns), meanOr(m.NewRuns)
		if m.Base == 0 { // new in the new build: judged in ms, against the smallest effect of the whole phase's
			m.AbsMin = max(o.MinEffect*baseUnit, 1e-9)
		}
		m.judge(o)
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b Metric) int {
		da, db := abs(a.New-a.Base), abs(b.New-b.Base)
		switch {
		case da > db:
			return -1
		case da < db:
			return 1
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	if len(ms) > 0 && abs(ms[0].New-ms[0].Base) > 0 {
		most, least := abs(ms[0].New-ms[0].Base), 0.0
		for _, m := range ms {
			if abs(m.New-m.Base) < 0.9*most {
				break
			}
			if spent := m.Base + m.New; cause == "" || spent < least {
				cause, least = m.Name, spent
			}
		}
	}
	for _, m := range ms { // most moved first: most spent first among the gone
		if m.New == 0 && m.Base >= o.MinEffect*baseUnit {
			gone = append(gone, m)
		}
	}
	return chains(ms, cause, profileMoved), chains(gone, "", 3), cause
}

// chains keeps one function of each chain, at most most: functions
// that call only each other (a hash and its wrappers) move by the same ms
// in every run, and five rows of one change would hide the next (the hash
// the new one replaced). The cause stands for its chain; else the first.
func chains(ms []Metric, cause string, most int) []Metric {
	var kept []Metric
	for _, m := range ms {
		i := slices.IndexFunc(kept, func(k Metric) bool { return sameRuns(k, m) })
		switch {
		case i < 0 && len(kept) < most:
			kept = append(kept, m)
		case i >= 0 && m.Name == cause:
			kept[i] = m
		}
	}
	return kept
}

func sameRuns(a, b Metric) bool {
	eq := func(x, y []float64) bool {
		return slices.EqualFunc(x, y, func(u, v float64) bool { return abs(u-v) <= 1e-9*max(abs(u), abs(v), 1e-9) })
	}
	return eq(a.BaseRuns, b.BaseRuns) && eq(a.NewRuns, b.NewRuns)
}

// heapMetric compares the heap in use at the phase's end; nil unless
// every run has it.
func heapMetric(phase string, bp, np []phaseRun, o Options) *Metric {
	m := &Metric{Name: fmt.Sprintf("server heap in use at the end (%s)", phase), Unit: "MB"}
	for _, r := range bp {
		if r.heapMB < 0 {
			return nil
		}
		m.BaseRuns = append(m.BaseRuns, r.heapMB)
	}
	for _, r := range np {
		if r.heapMB < 0 {
			return nil
		}
		m.NewRuns = append(m.NewRuns, r.heapMB)
	}
	m.Base, m.New = meanOr(m.BaseRuns), meanOr(m.NewRuns)
	m.judge(o)
	return m
}

// diffFlame is the runs' flame graphs in ms a unit, each side the mean of
// its runs: the new side's in Value, the base's in Base.
func diffFlame(bp, np []phaseRun) *result.Flame {
	root := &result.Flame{Name: "all"}
	for _, side := range []struct {
		runs []phaseRun
		base bool
	}{{bp, true}, {np, false}} {
		for _, r := range side.runs {
			if r.flame != nil && r.cpu > 0 {
				// CPU seconds to ms a unit: perUnit is the whole tree's
				serverprof.AddFlame(root, r.flame, r.perUnit/r.cpu.Seconds()/float64(len(side.runs)), side.base)
			}
		}
	}
	if root.Value <= 0 && root.Base <= 0 {
		return nil // no unit to count the CPU a unit of
	}
	return serverprof.PruneFlame(root, result.FlameMin*max(root.Value, root.Base))
}

func sampled(rs []phaseRun) time.Duration {
	var d time.Duration
	for _, r := range rs {
		d += r.cpu
	}
	return d
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
