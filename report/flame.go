package report

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"html"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/headroom-dev/headroom/result"
)

// Flame is a flame graph: each function a box as wide as its CPU, on its
// caller's box, the root ("all") at the bottom. Name is a file name stem,
// unique within a Doc with the charts' (the Markdown renderer writes
// Name+".svg"). Unit names Root's values ("s", "ms a request"). A Diff
// graph is as wide as the new side and coloured by each function's change
// from its Base: red more, blue less, grey the same. FromBase draws it as
// wide as the base side instead, so that what the new side no longer runs
// has a box (blue, as wide as the base spent in it).
type Flame struct {
	Name     string
	Title    string
	Unit     string
	Root     *result.Flame
	Diff     bool
	FromBase bool
}

func (*Flame) block() {}

// A flame graph is 1200 px wide; a frame is 16 px high.
const (
	flameWidth = 1200
	flameRow   = 16
	flameTop   = 28 // the title's band
	flameChar  = 6.6
)

// SVG draws the flame graph as an SVG document: no script, no font
// files; each box has a tooltip (its title) with its function's full
// name and figures.
func (f *Flame) SVG() []byte {
	depth := flameDepth(f.Root)
	height := flameTop + depth*flameRow + 4
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Verdana, DejaVu Sans, sans-serif" font-size="11">`+"\n",
		flameWidth, height, flameWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fafafa"/><text x="%d" y="18" font-size="13" text-anchor="middle">%s</text>`+"\n",
		flameWidth/2, html.EscapeString(xmlText(f.Title)))
	if f.Root == nil || max(f.Root.Value, f.Root.Base) <= 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">no CPU sampled</text>`+"\n", flameWidth/2, flameTop+flameRow)
	} else {
		most := 0.0
		if f.Diff {
			most = mostChange(f.Root)
		}
		f.box(&b, f.Root, f.Root, 0, flameWidth, height-4-flameRow, most)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// box draws n in [x, x+w) at y, and its callees above it.
func (f *Flame) box(b *bytes.Buffer, root, n *result.Flame, x, w float64, y int, most float64) {
	if w < 0.5 {
		return
	}
	fmt.Fprintf(b, `<g><title>%s</title><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#fafafa" stroke-width="0.5"/>`,
		html.EscapeString(xmlText(f.tooltip(root, n))), x, y, w, flameRow-1, f.colour(n, most))
	if label := fitLabel(shortFunc(funcName(n.Name)), w); label != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%d">%s</text>`, x+3, y+flameRow-4, html.EscapeString(label))
	}
	b.WriteString("</g>\n")
	if f.width(n) <= 0 {
		return
	}
	cx := x
	for _, c := range n.Children {
		cw := w * f.width(c) / f.width(n)
		f.box(b, root, c, cx, cw, y-flameRow, most)
		cx += cw
	}
}

// width is what n's box is as wide as: its value, or its base's.
func (f *Flame) width(n *result.Flame) float64 {
	if f.FromBase {
		return n.Base
	}
	return n.Value
}

func (f *Flame) tooltip(root, n *result.Flame) string {
	s := fmt.Sprintf("%s: %s %s (%s%%)", funcName(n.Name), num(n.Value), f.Unit, num(100*n.Value/root.Value))
	if f.Diff {
		s += fmt.Sprintf("; base %s %s", num(n.Base), f.Unit)
		if n.Base > 0 {
			s += fmt.Sprintf(", %+.0f%%", 100*(n.Value-n.Base)/n.Base)
		}
	}
	return s
}

// colour is a box's fill: by package in warm colours (a run's graph), or
// by its change against the largest change of any (a differential one).
func (f *Flame) colour(n *result.Flame, most float64) string {
	if !f.Diff {
		h := fnv.New32a()
		h.Write([]byte(funcPackage(n.Name)))
		v := h.Sum32()
		return fmt.Sprintf("rgb(%d,%d,%d)", 205+v%50, 80+(v>>8)%150, 30+(v>>16)%50)
	}
	d := n.Value - n.Base
	if most <= 0 || math.Abs(d) < 0.02*most {
		return "rgb(220,220,220)"
	}
	c := int(190 * math.Min(math.Abs(d)/most, 1))
	if d > 0 {
		return fmt.Sprintf("rgb(255,%d,%d)", 225-c, 225-c)
	}
	return fmt.Sprintf("rgb(%d,%d,255)", 225-c, 225-c)
}

func mostChange(n *result.Flame) float64 {
	m := math.Abs(n.Value - n.Base)
	for _, c := range n.Children {
		m = max(m, mostChange(c))
	}
	return m
}

func flameDepth(n *result.Flame) int {
	if n == nil {
		return 1
	}
	d := 0
	for _, c := range n.Children {
		d = max(d, flameDepth(c))
	}
	return d + 1
}

// fitLabel is s cut to what a box w px wide holds, "" when under three
// characters would.
func fitLabel(s string, w float64) string {
	n := int((w - 6) / flameChar)
	if n < 3 {
		return ""
	}
	if s = xmlText(s); utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-2]) + ".."
}

// xmlText is s without what XML 1.0 forbids in text (a profile's names are
// whatever its server wrote): invalid UTF-8, control characters other
// than tab, newline and return, surrogates, U+FFFE and U+FFFF. With
// html.EscapeString over it, the SVG is valid XML by construction.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r >= 0xD800 && r <= 0xDFFF || r == 0xFFFE || r == 0xFFFF {
			return -1
		}
		return r
	}, s)
}

// shortFunc is a function's name without its package's path:
// golang.org/x/crypto/pbkdf2.Key is pbkdf2.Key.
func shortFunc(name string) string {
	if i := strings.LastIndex(name, "/"); i >= 0 && !strings.Contains(name[:i], "(") && !strings.Contains(name[:i], "[") {
		return name[i+1:]
	}
	return name
}

// funcPackage is the package of a Go function's name: net/http.(*conn).serve is net/http.
func funcPackage(name string) string {
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}
