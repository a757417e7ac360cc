package report

import (
	"fmt"
	"strings"

	"github.com/headroom-dev/headroom/compare"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/serverprof"
)

// profileBlocks are the target's CPU profiles, phase by phase (--profile):
// its CPU, per unit of work, and the functions that spent it.
func profileBlocks(r *result.Result) []Block {
	ps := r.Profiles
	if ps == nil {
		return nil
	}
	out := []Block{&Heading{Level: 2, Text: "Server CPU profiles"}}
	failed := 0
	for _, s := range ps.Slices {
		if s.Error != "" {
			failed++
		}
	}
	example := "profiles/t1-0001.pb.gz"
	if len(ps.Phases) > 0 && ps.Phases[0].File != "" {
		example = ps.Phases[0].File
	}
	intro := fmt.Sprintf("%d CPU profiles of %s s each, in profiles/ (gzipped pprof: go tool pprof %s); "+
		"a phase is the merge of the profiles that lie wholly in it.", len(ps.Slices), num(ps.SliceS), example)
	if failed > 0 {
		intro += fmt.Sprintf(" %d failed (result.json's profiles.slices say why).", failed)
	}
	out = append(out, &Para{Text: intro})
	if len(ps.Phases) == 0 {
		return append(out, &Para{Text: "No profile lay wholly within a phase: a shorter --profile-slice covers a short run."})
	}
	drawn := flamePhases(ps.Phases)
	for i, ph := range ps.Phases {
		out = append(out, &Heading{Level: 3, Text: fmt.Sprintf("%s, %s", ps.Targets[ph.Target], phaseName(ph.Phase))}, &Para{Text: phaseText(ph)})
		t := &Table{Header: []string{"function", "cum (s)", "cum %", "flat (s)", "flat %"}, Right: []int{1, 2, 3, 4}}
		for _, f := range ph.Cum {
			if !serverprof.Plumbing(f.Name) && len(t.Rows) < 10 {
				t.Rows = append(t.Rows, []string{funcName(f.Name), num(f.CumS), num(f.CumPc), num(f.FlatS), num(f.FlatPc)})
			}
		}
		if len(t.Rows) > 0 {
			out = append(out, t)
		}
		var flat []string
		for _, f := range ph.Flat[:min(5, len(ph.Flat))] {
			flat = append(flat, fmt.Sprintf("%s %s%%", funcName(f.Name), num(f.FlatPc)))
		}
		if len(flat) > 0 {
			out = append(out, &Para{Text: "Most in themselves (flat): " + strings.Join(flat, "; ") + "."})
		}
		if h := ph.Heap; h != nil {
			out = append(out, &Para{Text: heapText(h)})
		}
		if drawn[i] && ph.Flame != nil {
			out = append(out, &Flame{Name: fmt.Sprintf("flame-%s-t%d", serverprof.Stem(ph.Phase), ph.Target+1),
				Title: fmt.Sprintf("Server CPU, %s (CPU seconds; hover a box for its figures)", phaseName(ph.Phase)), Unit: "s", Root: ph.Flame})
		}
	}
	return out
}

// goneText names the functions the base spent in that the new build never
// runs: what a new one replaced.
func goneText(pc compare.ProfileComparison, b, n string) string {
	var gone []string
	for _, m := range pc.Gone {
		gone = append(gone, fmt.Sprintf("%s (%s ms a %s in %s)", funcName(m.Name), num(m.Base), pc.Unit, b))
	}
	if len(gone) == 0 {
		return ""
	}
	return fmt.Sprintf(" Not run at all by %s: %s.", n, strings.Join(gone, ", "))
}

// notRun reports whether a differential tree holds a function the base
// ran and the new side never did (its calls from that caller).
func notRun(f *result.Flame) bool {
	if f.Base > 0 && f.Value <= 0 {
		return true
	}
	for _, c := range f.Children {
		if notRun(c) {
			return true
		}
	}
	return false
}

// heapText says what the server's heap held at a phase's end.
func heapText(h *result.ProfileHeap) string {
	s := fmt.Sprintf("Heap in use at %s s, the phase's last heap profile (as of the server's last garbage collection): %s MB", num(h.AtS), num(h.InuseMB))
	var top []string
	for _, f := range h.Top[:min(5, len(h.Top))] {
		top = append(top, fmt.Sprintf("%s %s%%", funcName(f.Name), num(f.Pc)))
	}
	if len(top) > 0 {
		s += "; allocated most by " + strings.Join(top, "; ")
	}
	if h.File != "" {
		s += " (" + h.File + ")"
	}
	return s + "."
}

// flamePhases are the phases a run's report draws a flame graph of: the
// users' setup, the window, a ceiling's holds and, of a step's or a
// ceiling's levels, each target's with the most users (the rest are in
// result.json and their profiles/).
func flamePhases(phs []result.ProfilePhase) map[int]bool {
	out := map[int]bool{}
	type level struct{ i, users int }
	top := map[int]level{} // by target: its level with the most users
	for i, ph := range phs {
		var n int
		if _, err := fmt.Sscanf(ph.Phase, "level %d", &n); err != nil {
			out[i] = true
			continue
		}
		if l, ok := top[ph.Target]; !ok || n >= l.users {
			top[ph.Target] = level{i, n}
		}
	}
	for _, l := range top {
		out[l.i] = true
	}
	return out
}

func phaseName(p string) string {
	switch {
	case p == "setup":
		return "users' setup (the ramp, to the window)"
	case p == "window":
		return "the measured window"
	case strings.HasPrefix(p, "level "), strings.HasPrefix(p, "hold "):
		return p + " users" // "level 40 users", "hold 38 users"
	}
	return p
}

func phaseText(ph result.ProfilePhase) string {
	s := fmt.Sprintf("%s to %s s: %d profiles, %s s profiled; CPU %s s, %s cores", num(ph.StartS), num(ph.EndS), ph.Slices,
		num(ph.ProfiledS), num(ph.CPUSeconds), num(ph.CPUCores))
	if ph.PerUnitMs > 0 {
		s += fmt.Sprintf(", %s ms a %s", num(ph.PerUnitMs), ph.Unit)
	}
	return s + ". Cumulative: in the function and what it called (the runtime and net/http's serving left out)."
}

// funcName is a function's name with its generic shapes left out
// (pbkdf2.Key[go.shape.interface { ... }] is pbkdf2.Key[...]).
func funcName(name string) string {
	for {
		i := strings.Index(name, "[go.shape")
		if i < 0 {
			return name
		}
		depth, j := 0, i
		for ; j < len(name); j++ {
			if name[j] == '[' {
				depth++
			} else if name[j] == ']' {
				if depth--; depth == 0 {
					break
				}
			}
		}
		if j == len(name) {
			return name[:i] + "[...]"
		}
		name = name[:i] + "[...]" + name[j+1:]
	}
}

// targetName is a compared profile's target: "Target 2 (mariadbd)".
func targetName(pc compare.ProfileComparison) string {
	if pc.Binary == "" {
		return fmt.Sprintf("Target %d", pc.Target+1)
	}
	return fmt.Sprintf("Target %d (%s)", pc.Target+1, pc.Binary)
}

// profileCompareBlocks compare the server's CPU profiles phase by phase:
// the CPU a unit of work took, and the functions whose share moved most.
func profileCompareBlocks(c *compare.Comparison) []Block {
	if len(c.Profiles) == 0 {
		return nil
	}
	b, n := c.Base.Label, c.New.Label
	out := []Block{&Heading{Level: 2, Text: "Server CPU profiles"}, &Para{Text: "Each phase's merged CPU profiles (--profile): the CPU a unit of work took, " +
		"and the functions whose CPU a unit (in them and what they called, ms) moved most."}}
	for _, pc := range c.Profiles {
		out = append(out, &Heading{Level: 3, Text: fmt.Sprintf("%s, %s", targetName(pc), phaseName(pc.Phase))})
		t := metricTable(b, n)
		metricRow(t, pc.CPUPerUnit.Name, &pc.CPUPerUnit)
		if pc.HeapMB != nil {
			metricRow(t, pc.HeapMB.Name, pc.HeapMB)
		}
		switch {
		case pc.Cause != "":
			out = append(out, &Para{Text: fmt.Sprintf("Most of the change is in %s and what it calls.%s", funcName(pc.Cause), goneText(pc, b, n))})
		case pc.CPUPerUnit.Verdict == compare.NoChange:
			out = append(out, &Para{Text: fmt.Sprintf("No significant change in the server's CPU a %s: no cause named (the functions below moved within it).", pc.Unit)})
		case pc.SampledS < 1:
			out = append(out, &Para{Text: fmt.Sprintf("Too few samples to say which function moved: %s s of the server's CPU sampled on one side "+
				"(100 samples a second of CPU); a longer phase, or more repeats, say more.", num(pc.SampledS))})
		}
		for i := range pc.Moved {
			m := &pc.Moved[i]
			metricRow(t, funcName(m.Name)+" (ms)", m)
		}
		out = append(out, t)
		if pc.Flame != nil {
			unit := "ms a " + pc.Unit
			stem := fmt.Sprintf("flame-diff-%s-t%d", serverprof.Stem(pc.Phase), pc.Target+1)
			out = append(out, &Flame{Name: stem, Unit: unit, Root: pc.Flame, Diff: true,
				Title: fmt.Sprintf("Server CPU, %s (%s): as wide as %s's, red where it spent more than %s, blue less", phaseName(pc.Phase), unit, n, b)})
			if notRun(pc.Flame) { // the other half of a change has no box as wide as the new side
				out = append(out, &Flame{Name: stem + "-base", Unit: unit, Root: pc.Flame, Diff: true, FromBase: true,
					Title: fmt.Sprintf("The same, as wide as %s's: what %s no longer runs in blue", b, n)})
			}
		}
	}
	return out
}
