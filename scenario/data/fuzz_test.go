package data

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

// FuzzDataCSV parses arbitrary bytes as a data.csv file with an arbitrary
// delimiter: it never panics; a dataset it keeps has named, distinct
// columns and at least one row, every row as wide as the header; an error
// names the file; and what it keeps, written back as CSV, parses to the
// same dataset.
//
//	go test -run='^$' -fuzz=FuzzDataCSV -fuzztime=2m ./scenario/data/
func FuzzDataCSV(f *testing.F) {
	for _, s := range []string{
		"username,password\nmember-1,pw1\nmember-2,pw2\n",
		"\xef\xbb\xbfa;b\r\n1;2\r\n",
		"a,b\n\"x,\"\"y\"\"\",2\n",
		"a,a\n1,2\n", ",b\n1,2\n", "a,b\n1\n", "a\n", "", "\"a\nb\"\n1\n", "a,b\n\"1,2\n",
		"a\n\"\"\n", "a\tb\n1\t2\n",
	} {
		f.Add([]byte(s), int32(','))
	}
	f.Add([]byte("a\tb\n1\t2\n"), int32('\t'))
	f.Add([]byte("a\"b\n1\"2\n"), int32('"'))
	f.Fuzz(func(t *testing.T, content []byte, sep int32) {
		d := &Dataset{Path: "users.csv"}
		if err := d.parse(content, rune(sep)); err != nil {
			if !strings.HasPrefix(err.Error(), "users.csv") {
				t.Fatalf("the error does not name the file: %v", err)
			}
			return
		}
		if len(d.columns) == 0 || len(d.rows) == 0 {
			t.Fatalf("kept %d columns and %d rows", len(d.columns), len(d.rows))
		}
		seen := map[string]bool{}
		header := make([]string, len(d.columns))
		for i, v := range d.columns {
			c := string(v.(starlark.String))
			header[i] = c
			if c == "" || seen[c] {
				t.Fatalf("columns %q: an empty or repeated name", d.columns)
			}
			seen[c] = true
		}
		for i, row := range d.rows {
			if len(row) != len(d.columns) {
				t.Fatalf("row %d has %d fields, the header %d", i, len(row), len(d.columns))
			}
		}
		// Written back: but a one-column row that is empty, which a CSV
		// writer leaves as an empty line and a reader skips, and a first
		// column named with a byte order mark, which the parser drops.
		if len(header) == 1 || strings.HasPrefix(header[0], "\xef\xbb\xbf") {
			return
		}
		var buf bytes.Buffer
		w := csv.NewWriter(&buf)
		w.Comma = rune(sep)
		w.Write(header)
		w.WriteAll(d.rows)
		again := &Dataset{Path: "users.csv"}
		if err := again.parse(buf.Bytes(), rune(sep)); err != nil {
			t.Fatalf("%q, written back as %q: %v", content, buf.Bytes(), err)
		}
		if !slices.Equal(again.columns, d.columns) || !slices.EqualFunc(again.rows, d.rows, slices.Equal) {
			t.Fatalf("%q, written back as %q, parsed to %q %q, not %q %q", content, buf.Bytes(), again.columns, again.rows, d.columns, d.rows)
		}
	})
}
