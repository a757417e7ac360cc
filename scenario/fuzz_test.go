package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"runtime/metrics"
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
