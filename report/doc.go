// Package report turns results and comparisons into documents people read:
// Markdown with PNG charts, ready to paste into release notes, and one
// self-contained HTML file. Content is built once as a Doc; the renderers
// only lay it out, so both forms always say the same thing.
package report

// Doc is a report's content, in reading order.
type Doc struct {
	Title  string
	Blocks []Block
}

// Block is one piece of a Doc: *Heading, *Para, *List, *Table, *Chart or
// *Flame.
type Block interface{ block() }

// Heading starts a section; Level 2 is a section, 3 a subsection (the
// title is level 1).
type Heading struct {
	Level int
	Text  string
}

// Para is a paragraph of plain text.
type Para struct{ Text string }

// List is a bulleted list of plain-text items.
type List struct{ Items []string }

// Table is a table of plain-text cells. Right lists the columns that are
// right-aligned (numbers). Renderers colour cells that start with a
// verdict word ("regression", "improvement").
type Table struct {
	Header []string
	Rows   [][]string
	Right  []int
}

// Chart is a line chart. Name is unique within a Doc and safe as a file
// name stem (the Markdown renderer writes Name+".png").
type Chart struct {
	Name   string
	Title  string
	XLabel string
	YLabel string
	Series []Series
}

// Series is one line of a chart. X and Y have the same length. Dashed
// draws it dashed (e.g. a threshold, or the base side of a comparison
// when colours alone would not tell them apart in print).
type Series struct {
	Name   string
	X, Y   []float64
	Dashed bool
}

func (*Heading) block() {}
func (*Para) block()    {}
func (*List) block()    {}
func (*Table) block()   {}
func (*Chart) block()   {}
