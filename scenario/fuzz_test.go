package scenario

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/starjson"
	"github.com/headroom-dev/headroom/transport"
	"go.starlark.net/starlark"
)

// FuzzResponseJSON feeds a response body to r.json(): it never panics, it
// returns a value or an error, and what it decodes survives json.encode
// and a second decode unchanged.
//
//	go test -run='^$' -fuzz=FuzzResponseJSON -fuzztime=2m ./scenario/
func FuzzResponseJSON(f *testing.F) {
	for _, s := range []string{
		`{"id": "u1", "n": [1, 2.5, -3e2, true, false, null]}`,
		`[]`, `{}`, `""`, `0`, `-0`, `1.`, `01`, `-`, `1e400`, `[1,]`, `{"a" 1}`, `"\ud800"`, `"\u00e9\n\"x\\"`,
		"\xff\xfe", `"` + "\xff" + `"`, `[` + strings.Repeat(`"]`, 3), `{"a":{"b":{"c":[[[]]]}}}`,
		strings.Repeat("[", 1001),
		strings.Repeat("[", 1000) + strings.Repeat("]", 1000),
		strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001),
		"1" + strings.Repeat("0", 1000),
		"[" + strings.Repeat("9", 1001) + "]",
		`"` + strings.Repeat("[", 2000) + `"`,
	} {
		f.Add([]byte(s))
	}
	th := &starlark.Thread{Name: "fuzz"}
	encode := jsonModule.Members["encode"]
	f.Fuzz(func(t *testing.T, body []byte) {
		r := &responseValue{r: transport.Response{Status: 200, Body: body}}
		fn, _ := r.Attr("json")
		v, err := starlark.Call(th, fn, nil, nil)
		if (v == nil) == (err == nil) {
			t.Fatalf("value %.200v and error %v", v, err)
		}
		if err != nil {
			// Valid JSON within the limits decodes, but for numbers a
			// float64 cannot hold (1e400), which Starlark refuses. (What
			// is over the limits, FuzzDecodeJSON holds to its own oracle.)
			if json.Valid(body) && !errors.As(err, new(*starjson.LimitError)) && !strings.Contains(err.Error(), "invalid number") {
				t.Fatalf("valid JSON refused: %v", err)
			}
			return
		}
		enc, err := starlark.Call(th, encode, starlark.Tuple{v}, nil)
		if err != nil {
			t.Fatalf("json.encode of what was decoded (%.200v): %v", v, err)
		}
		r2 := &responseValue{r: transport.Response{Status: 200, Body: []byte(enc.(starlark.String))}}
		fn2, _ := r2.Attr("json")
		v2, err := starlark.Call(th, fn2, nil, nil)
		if err != nil {
			t.Fatalf("decoding %.200s, the encoding of %.200q: %v", enc, body, err)
		}
		// Compared by their encodings: starlark.Equal gives up past 10 levels.
		if enc2, err := starlark.Call(th, encode, starlark.Tuple{v2}, nil); err != nil || enc2 != enc {
			t.Fatalf("%.200q decoded and encoded to %.200s, which decoded and encoded to %.200v (%v)", body, enc, enc2, err)
		}
	})
}

// hugeAlloc finds what could make one allocation of gigabytes, which no
// limit can stop: a repetition (`[0] * 10**9`, 16 GB), a shift, or a
// literal of seven or more digits (`list(range(99999999))`). The fuzzing
// of Load skips such sources to keep the machine alive; a watchdog of
// memory stops the growth that takes many steps (`s = s + s`).
var hugeAlloc = regexp.MustCompile(`\*|<<|[0-9a-fA-F_]{7,}`)

// FuzzLoad loads arbitrary source under short limits: Load never panics,
// returns a Scenario or an error, and returns within its load timeout
// and grace.
//
//	go test -run='^$' -fuzz=FuzzLoad -fuzztime=2m ./scenario/
func FuzzLoad(f *testing.F) {
	if chat, err := os.ReadFile("../examples/chat.star"); err == nil {
		f.Add(strings.ReplaceAll(string(chat), "*", "+")) // keeps it loadable but for a few lines
	}
	const acts = "def a(user):\n    user.http.get('/')\nactions = [action('A', a)]\n"
	for _, s := range []string{
		acts,
		acts + "think_time = think.reference(min='1s', avg='5s', rates=[(5.4, 0.5), (1, 0.5)])\nchecks = [check('p99', 'up', threshold=2)]\n",
		acts + "think_time = think.constant(1e300)\n",
		acts + "think_time = think.exponential('300000h')\n",
		acts + "checks = []\n",
		"def a(user):\n    pass\nactions = [action('A', a, weight=1e308), action('B', a, weight=1e308)]\n",
		"while True:\n    pass\n",
		"x = 0\nwhile True:\n    x += 1\n",
		"s = 'ab'\nwhile True:\n    s = s + s\n",
		"x = " + strings.Repeat("1 + ", maxNesting+5) + "1\n",
		"x = json.decode('" + strings.Repeat("[", 1001) + "')\n",
		"def setup(user, extra):\n    pass\n" + acts,
		"def f():\n    f()\nf()\n",
		"x = {}['k']\n",
		"load('x.star', 'y')\n",
		"def a(user):\n  pass\nactions = [action('A', a), action('A', a)]\n",
		acts + "print(json.encode({'a': [1, 2]}))\nfail('at load')\n",
	} {
		f.Add(s)
	}
	lim := Limits{MaxSteps: 100_000, LoadTimeout: 100 * time.Millisecond}
	f.Fuzz(func(t *testing.T, src string) {
		if hugeAlloc.MatchString(src) {
			return // could allocate gigabytes in one step, which no limit can stop: not an input this target judges
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := watchHeap(cancel, 128<<20)
		defer stop()
		start := time.Now()
		sc, err := Load(ctx, "f.star", []byte(src), lim)
		// What this guards against is a Load that ignores its timeout: it
		// runs a loop forever, or until its steps run out. A Load that
		// heeds it ends within the timeout, its grace and the collection
		// of what the input allocated: up to 2.4 s here beside two busy
		// loops (a string doubled up to the heap's watch), which a bound of
		// 2.2 s once failed. 20 s lies far from both.
		if took := time.Since(start); took > 20*time.Second {
			t.Fatalf("Load took %v", took)
		}
		if (sc == nil) == (err == nil) {
			t.Fatalf("scenario %v and error %v", sc, err)
		}
		var ie *InternalError
		if errors.As(err, &ie) {
			t.Fatalf("a panic: %v", err)
		}
	})
}

// watchHeap calls cancel once the heap holds more than limit bytes,
// looking every millisecond until stop is called.
func watchHeap(cancel func(), limit uint64) (stop func()) {
	done := make(chan struct{})
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				metrics.Read(s)
				if s[0].Value.Uint64() > limit {
					cancel()
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// FuzzDataCSV parses arbitrary bytes as a data.csv file with an arbitrary
// delimiter: it never panics; a dataset it keeps has named, distinct
// columns and at least one row, every row as wide as the header; an error
// names the file; and what it keeps, written back as CSV, parses to the
// same dataset.
//
//	go test -run='^$' -fuzz=FuzzDataCSV -fuzztime=2m ./scenario/
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
