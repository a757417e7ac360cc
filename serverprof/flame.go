package serverprof

import (
	"slices"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/headroom-dev/headroom/result"
)

// FlameDepth is the most calls a flame graph's tree goes down from its
// root (Go records 128 frames of a stack, inlined ones among them): a
// deeper one's last calls are left out of the tree, not of its value,
// so that result.json, which holds the tree, grows with the profile's
// functions and not with the square of a stack's depth.
const FlameDepth = 160

// Flame is p's CPU as a flame graph's tree, in CPU seconds: every stack
// from the root "all" to its leaf (inlined calls are functions of their
// own, as pprof shows them), siblings of one name merged, the largest
// first; functions under result.FlameMin of the whole left out, and
// calls deeper than FlameDepth.
func Flame(p *profile.Profile) *result.Flame {
	root := &result.Flame{Name: "all"}
	ci := cpuIndex(p)
	if ci < 0 {
		return root
	}
	index := map[*result.Flame]map[string]*result.Flame{}
	child := func(f *result.Flame, name string) *result.Flame {
		m := index[f]
		if m == nil {
			m = map[string]*result.Flame{}
			index[f] = m
		}
		c := m[name]
		if c == nil {
			c = &result.Flame{Name: name}
			m[name] = c
			f.Children = append(f.Children, c)
		}
		return c
	}
	for _, s := range p.Sample {
		v := float64(s.Value[ci]) / 1e9
		root.Value += v
		f, depth := root, 0
	stack:
		for li := len(s.Location) - 1; li >= 0; li-- { // the caller is last
			lines := s.Location[li].Line
			for ki := len(lines) - 1; ki >= 0; ki-- { // so is the inlining function
				if depth++; depth > FlameDepth {
					break stack
				}
				name := "?"
				if lines[ki].Function != nil {
					name = lines[ki].Function.Name
				}
				f = child(f, name)
				f.Value += v
			}
		}
	}
	return PruneFlame(root, result.FlameMin*root.Value)
}

// PruneFlame leaves out of f the functions whose value (and base) are
// both under least, and orders each one's callees, the largest first
// (ties by name). It returns f.
func PruneFlame(f *result.Flame, least float64) *result.Flame {
	kept := f.Children[:0]
	for _, c := range f.Children {
		if least <= 0 || max(c.Value, c.Base) >= least {
			kept = append(kept, PruneFlame(c, least))
		}
	}
	clear(f.Children[len(kept):])
	f.Children = kept
	slices.SortFunc(f.Children, func(a, b *result.Flame) int {
		if a, b := max(a.Value, a.Base), max(b.Value, b.Base); a != b {
			if a > b {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(f.Children) == 0 {
		f.Children = nil
	}
	return f
}

// AddFlame adds src, each value times k, into dst: into Base when base,
// else into Value. Trees of several runs so become their mean, and two
// sides' one differential tree.
func AddFlame(dst, src *result.Flame, k float64, base bool) {
	if base {
		dst.Base += k * src.Value
	} else {
		dst.Value += k * src.Value
	}
	for _, sc := range src.Children {
		var dc *result.Flame
		for _, c := range dst.Children {
			if c.Name == sc.Name {
				dc = c
				break
			}
		}
		if dc == nil {
			dc = &result.Flame{Name: sc.Name}
			dst.Children = append(dst.Children, dc)
		}
		AddFlame(dc, sc, k, base)
	}
}
