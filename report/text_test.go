package report

import (
	"bytes"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestTerminalSaysWhatTheReportSays renders real results both ways, the
// terminal's summary as text and the report as Markdown, and checks that
// the summary is the report's own blocks (none reworded, none of its own)
// and that every figure the terminal prints is in the report.
func TestTerminalSaysWhatTheReportSays(t *testing.T) {
	figure := regexp.MustCompile(`\d[\d,]*(\.\d+)?`)
	for _, name := range []string{"ceil-1", "step-1", "base-1", "open-1"} {
		t.Run(name, func(t *testing.T) {
			r := fixture(t, name)
			sum, full := Summary(r), ForResult(r)
			j := 0 // each summary block is the next equal block of the report
			for _, b := range sum.Blocks {
				if _, ok := b.(*Chart); ok {
					t.Errorf("a chart in the terminal's summary: %+v", b)
				}
				for j < len(full.Blocks) && !reflect.DeepEqual(full.Blocks[j], b) {
					j++
				}
				if j == len(full.Blocks) {
					t.Fatalf("the summary's block %#v is not in the report, or not in its order", b)
				}
				j++
			}
			var text bytes.Buffer
			if err := Text(&text, sum); err != nil {
				t.Fatal(err)
			}
			md := string(Markdown(full))
			figures := figure.FindAllString(text.String(), -1)
			if len(figures) < 50 {
				t.Fatalf("only %d figures in the terminal's summary:\n%s", len(figures), text.String())
			}
			for _, f := range figures {
				if !strings.Contains(md, f) {
					t.Errorf("the terminal says %s, the report never does", f)
				}
			}
			// The answer is in both, word for word.
			head := sum.Blocks[0].(*Para).Text
			if !strings.Contains(text.String(), strings.Fields(head)[0]) || !strings.Contains(md, escape(head)) {
				t.Errorf("the headline %q is not in both forms", head)
			}
		})
	}
}

// TestTextTableAlignsColumns: numbers to the right, words to the left,
// short rows padded, wide cells widening their column.
func TestTextTableAlignsColumns(t *testing.T) {
	var b bytes.Buffer
	TextTable(&b, &Table{Header: []string{"request", "count", "p99 (ms)"}, Right: []int{1, 2}, Rows: [][]string{
		{"GET /a", "1,234", "5.00"},
		{"POST /a-much-longer-name", "7", "120"},
		{"(other)"},
	}})
	want := "" +
		"request                   count  p99 (ms)\n" +
		"GET /a                    1,234      5.00\n" +
		"POST /a-much-longer-name      7       120\n" +
		"(other)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestTextWrapsParagraphs: long text breaks between words at textWidth,
// list items hang under their dash, and no word is split or lost.
func TestTextWrapsParagraphs(t *testing.T) {
	long := strings.Repeat("figure ", 40)
	var b bytes.Buffer
	if err := Text(&b, &Doc{Blocks: []Block{&Para{Text: long}, &List{Items: []string{long}}, &Chart{Title: "p99"}}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for _, l := range lines {
		if len(l) > textWidth {
			t.Errorf("line of %d characters: %q", len(l), l)
		}
	}
	if got := strings.Count(b.String(), "figure"); got != 80 {
		t.Errorf("%d words, want 80", got)
	}
	if !strings.Contains(b.String(), "\n  - figure") || !strings.Contains(b.String(), "\n    figure") || !strings.Contains(b.String(), "(chart: p99,") {
		t.Errorf("list item not hung under its dash, or the chart not named:\n%s", b.String())
	}
}
