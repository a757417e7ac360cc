package report

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"strconv"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// A chart is 900x400 px: wide enough for a minute-by-minute timeline,
// short enough that two fit on a laptop screen.
const (
	chartDPI    = 96
	chartWidth  = 900 * vg.Inch / chartDPI
	chartHeight = 400 * vg.Inch / chartDPI
)

// palette colours series in order (Okabe-Ito, without its yellow, which
// is unreadable on white): distinct for the common kinds of colour
// blindness, and still apart when printed in grey because the base side of
// a comparison is drawn dashed.
var palette = [...]color.RGBA{
	{0x00, 0x72, 0xb2, 0xff}, // blue
	{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	{0x00, 0x9e, 0x73, 0xff}, // bluish green
	{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
	{0xe6, 0x9f, 0x00, 0xff}, // orange
	{0x56, 0xb4, 0xe9, 0xff}, // sky blue
	{0x00, 0x00, 0x00, 0xff}, // black
}

// seriesColor is the colour of the i-th series of a chart; past the end
// of the palette the colours repeat.
func seriesColor(i int) color.RGBA { return palette[i%len(palette)] }

var (
	sans     = font.Font{Typeface: "Liberation", Variant: "Sans"}
	sansBold = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}
)

// PNG draws the chart as a 900x400 PNG image with 256 colours. The same
// chart always gives the same bytes. A chart with no finite point is
// drawn with empty axes and a "no data" note rather than failing.
func (c *Chart) PNG() ([]byte, error) {
	cv := vgimg.NewWith(vgimg.UseWH(chartWidth, chartHeight), vgimg.UseDPI(chartDPI))
	c.draw(draw.New(cv))
	var buf bytes.Buffer
	if err := png.Encode(&buf, toPaletted(cv.Image())); err != nil {
		return nil, fmt.Errorf("chart %s: encode PNG: %w", c.Name, err)
	}
	return buf.Bytes(), nil
}

// toPaletted maps every pixel to the nearest colour of pngColors. A chart
// has only greys and its series' colours blended with white, so nothing
// visible is lost, and the PNG is 2.5 times smaller than in full colour
// (40 KB instead of 100 KB for three noisy 600-point series), which
// matters for the HTML report that embeds every chart.
func toPaletted(img image.Image) *image.Paletted {
	pal := pngColors()
	b := img.Bounds()
	out := image.NewPaletted(b, pal)
	index := map[color.RGBA]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(c))
				index[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	return out
}

// pngColors is the PNG palette: 64 greys from black to white, and 24
// blends of each series colour with white, the colour itself included.
func pngColors() color.Palette {
	pal := make(color.Palette, 0, 64+24*len(palette))
	for i := range 64 {
		v := uint8(i * 255 / 63)
		pal = append(pal, color.RGBA{v, v, v, 0xff})
	}
	for _, c := range palette {
		for k := 1; k <= 24; k++ {
			f := float64(k) / 24
			blend := func(v uint8) uint8 { return uint8(math.Round(255 - f*(255-float64(v)))) }
			pal = append(pal, color.RGBA{blend(c.R), blend(c.G), blend(c.B), 0xff})
		}
	}
	return pal
}

// SVG draws the chart as a 900x400 px SVG document, as PNG does. Fonts
// are named (Liberation Sans), not embedded: a viewer without them
// substitutes its own sans-serif, so text may sit slightly off.
func (c *Chart) SVG() ([]byte, error) {
	cv := vgsvg.NewWith(vgsvg.UseWH(chartWidth, chartHeight))
	c.draw(draw.New(cv))
	var buf bytes.Buffer
	if _, err := cv.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("chart %s: encode SVG: %w", c.Name, err)
	}
	return buf.Bytes(), nil
}

// draw lays the chart out on dc: the plot on the left, the legend (when
// there is more than one series) in a column on the right, where it can
// never hide a line.
func (c *Chart) draw(dc draw.Canvas) {
	p := plot.New()
	p.Title.Text = c.Title
	p.Title.TextStyle.Font = font.From(sansBold, 14)
	p.Title.Padding = vg.Points(6)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(sans, 11)
		ax.Tick.Label.Font = font.From(sans, 10)
	}
	p.X.Tick.Marker = niceTicks{n: 8}
	p.Y.Tick.Marker = niceTicks{n: 6}
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{0xdc}
	grid.Horizontal.Color = color.Gray{0xdc}
	p.Add(grid)

	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font = font.From(sans, 11)
	legend.ThumbnailWidth = vg.Points(24)
	legend.Padding = vg.Points(3)

	points := 0
	names := make([]string, len(c.Series))
	for i, s := range c.Series {
		style := draw.LineStyle{Color: seriesColor(i), Width: vg.Points(1.5)}
		if s.Dashed {
			style.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		n := 0
		for _, run := range finiteRuns(s) {
			n += len(run)
			p.Add(runPlotter(run, style))
		}
		points += n
		names[i] = s.Name
		if n == 0 {
			names[i] += " (no data)"
		}
		legend.Add(names[i], &plotter.Line{LineStyle: style})
	}

	dc = draw.Crop(dc, vg.Points(4), -vg.Points(12), vg.Points(4), -vg.Points(6))
	plotArea := dc
	if len(c.Series) > 1 {
		w := legendWidth(legend.TextStyle, legend.ThumbnailWidth, names)
		plotArea = draw.Crop(dc, 0, -w, 0, 0)
		legendArea := draw.Crop(dc, dc.Size().X-w, 0, 0, -vg.Points(30))
		legend.Draw(legendArea)
	}

	if points == 0 {
		p.Draw(plotArea)
		note := text.Style{
			Color:   color.Gray{0x70},
			Font:    font.From(sans, 14),
			XAlign:  draw.XCenter,
			YAlign:  draw.YCenter,
			Handler: p.TextHandler,
		}
		data := p.DataCanvas(plotArea)
		data.FillText(note, data.Center(), "no data")
		return
	}
	// Latencies, rates and user counts start at zero: a chart whose axis
	// starts at the minimum makes a 2% change look like a cliff.
	if p.Y.Min > 0 {
		p.Y.Min = 0
	}
	p.Y.Max += 0.05 * (p.Y.Max - p.Y.Min)
	p.Draw(plotArea)
}

// niceTicks puts about n labelled ticks on an axis, at steps of 1, 2, 2.5
// or 5 times a power of ten, labelled with as many decimals as the step
// needs ("250", not "250.00"), with an unlabelled tick halfway between.
// gonum's default gives three labels, too few across 900 px.
type niceTicks struct{ n int }

func (t niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || !isFinite(hi-lo) {
		return nil
	}
	step := niceStep((hi - lo) / float64(max(t.n-1, 1)))
	prec := decimals(step)
	var ticks []plot.Tick
	first := math.Ceil(lo / step * 2)
	// Bounded, in case first+k cannot change (lo huge against the step).
	for k := range 2*t.n + 4 {
		i := first + float64(k)
		v := i / 2 * step
		if v > hi+step*1e-9 {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0 // not "-0" from rounding
		}
		tick := plot.Tick{Value: v}
		if math.Mod(i, 2) == 0 {
			tick.Label = strconv.FormatFloat(v, 'f', prec, 64)
		}
		ticks = append(ticks, tick)
	}
	return ticks
}

// niceStep is the smallest of 1, 2, 2.5, 5 and 10 times a power of ten
// that is at least raw.
func niceStep(raw float64) float64 {
	pow := math.Pow10(int(math.Floor(math.Log10(raw))))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*pow >= raw*(1-1e-9) {
			return m * pow
		}
	}
	return 10 * pow
}

// decimals is the number of decimals that writes step exactly, at most 9.
func decimals(step float64) int {
	for prec := 0; prec < 9; prec++ {
		scaled := step * math.Pow10(prec)
		if math.Abs(scaled-math.Round(scaled)) < 1e-6*max(scaled, 1) {
			return prec
		}
	}
	return 9
}

// legendWidth is the width of the legend column: the longest name, its
// thumbnail and some space, at most a third of the chart.
func legendWidth(sty text.Style, thumb vg.Length, names []string) vg.Length {
	var w vg.Length
	for _, name := range names {
		w = max(w, sty.Width(name))
	}
	w += thumb + vg.Points(20)
	return min(w, chartWidth/3)
}

// finiteRuns splits a series at its missing points (NaN or infinite X or
// Y): each run is drawn as its own line, so a gap shows as a gap. Points
// past the shorter of X and Y are ignored.
func finiteRuns(s Series) []plotter.XYs {
	n := min(len(s.X), len(s.Y))
	var runs []plotter.XYs
	var cur plotter.XYs
	for i := range n {
		x, y := s.X[i], s.Y[i]
		if isFinite(x) && isFinite(y) {
			cur = append(cur, plotter.XY{X: x, Y: y})
			continue
		}
		if len(cur) > 0 {
			runs = append(runs, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		runs = append(runs, cur)
	}
	return runs
}

func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// runPlotter draws a run of finite points: a line, or a dot for a run of
// one point, which a line would not show.
func runPlotter(run plotter.XYs, style draw.LineStyle) plot.Plotter {
	if len(run) == 1 {
		return &plotter.Scatter{
			XYs: run,
			GlyphStyle: draw.GlyphStyle{
				Color:  style.Color,
				Radius: vg.Points(2.5),
				Shape:  draw.CircleGlyph{},
			},
		}
	}
	return &plotter.Line{XYs: run, LineStyle: style}
}
