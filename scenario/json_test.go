package scenario

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"go.starlark.net/starlark"
)

// decodeBody runs r.json() on a response with that body, in an action,
// and returns the action's outcome and message, and the bytes allocated
// meanwhile.
func decodeBody(t *testing.T, body string) (metrics.Outcome, string, uint64) {
	t.Helper()
	d := &fakeDoer{status: 200, body: body}
	sc, err := load("j.star", "def act(user):\n    user.state['v'] = user.http.get('/').json()\nactions = [action('A', act)]\n")
	if err != nil {
		t.Fatal(err)
	}
	rec := &samples{}
	u := NewUser(sc, Env{ID: 1, Seed: 1, HTTP: d, Record: rec})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out := u.Run(sc.Actions[0])
	runtime.ReadMemStats(&after)
	return out, last(rec).Message, after.TotalAlloc - before.TotalAlloc
}

func TestDeepJSONFailsTheActionInBoundedMemory(t *testing.T) {
	for name, body := range map[string]string{
		// Without the limit, Starlark's recursive decoder overflows Go's
		// stack on the first (a fatal error) and takes ~1 GB on the second.
		"5,000,000 [":              strings.Repeat("[", 5_000_000),
		"balanced, 1,000,000 deep": strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000),
		"objects, 1001 deep":       strings.Repeat(`{"a":`, 1001) + "1" + strings.Repeat("}", 1001),
	} {
		t.Run(name, func(t *testing.T) {
			out, msg, alloc := decodeBody(t, body)
			if out != metrics.Failed || !strings.Contains(msg, "response.json: JSON nested too deep (more than 1000 levels, at byte ") {
				t.Errorf("outcome %v, message %q", out, msg)
			}
			// The fake Doer copies the body once, the response.json
			// builtin's String conversion once more; nothing else is big.
			if alloc > 3*uint64(len(body))+1<<20 {
				t.Errorf("decoding %d bytes allocated %d", len(body), alloc)
			}
		})
	}
	// The limit itself decodes.
	body := strings.Repeat(`[{"a":`, 500) + "1" + strings.Repeat("}]", 500)
	if out, msg, _ := decodeBody(t, body); out != metrics.OK {
		t.Errorf("1000 levels: %v %q", out, msg)
	}
}

func TestLegalJSONDecodesInMemoryProportionalToIt(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 20_000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":"u%06d","name":"user \"%d\"","n":%d,"ok":true,"tags":["a","b"]}`, i, i, i)
	}
	b.WriteString("]")
	body := b.String()
	out, msg, alloc := decodeBody(t, body)
	if out != metrics.OK {
		t.Fatalf("outcome %v %q", out, msg)
	}
	// Measured: about 17 times the body: a dict, a list and boxed values
	// per object, and encoding/json's unquoting of each string with an
	// escape. The depth check adds no allocation of its own.
	t.Logf("%d bytes of JSON: %d allocated (%.1fx)", len(body), alloc, float64(alloc)/float64(len(body)))
	if alloc > 25*uint64(len(body)) {
		t.Errorf("decoding %d bytes allocated %d, more than 25 times", len(body), alloc)
	}
}

func TestLongJSONNumbersAreRefused(t *testing.T) {
	// math/big parses n digits in time growing as n²: 3,000,000 take ~15 s,
	// inside a builtin that nothing can interrupt.
	out, msg, _ := decodeBody(t, `{"n": 1`+strings.Repeat("0", 3_000_000)+`}`)
	if out != metrics.Failed || !strings.Contains(msg, "response.json: JSON number too long (more than 1000 characters, at byte 6)") {
		t.Errorf("outcome %v, message %q", out, msg)
	}
	if out, msg, _ := decodeBody(t, `[-1`+strings.Repeat("0", 998)+`, 1e300, "`+strings.Repeat("9", 5000)+`"]`); out != metrics.OK {
		t.Errorf("a 1000-character number and a long string of digits: %v %q", out, msg)
	}
}

func TestJSONDecodeBuiltinHasTheLimitsToo(t *testing.T) {
	deep := strings.Repeat("[", 2000)
	th := &starlark.Thread{}
	dec := jsonModule.Members["decode"]
	if _, err := starlark.Call(th, dec, starlark.Tuple{starlark.String(deep)}, nil); err == nil ||
		err.Error() != "json.decode: JSON nested too deep (more than 1000 levels, at byte 1000)" {
		t.Errorf("error %v", err)
	}
	// default= is returned for a body over the limits, as for one that is not JSON.
	v, err := starlark.Call(th, dec, starlark.Tuple{starlark.String(deep)}, []starlark.Tuple{{starlark.String("default"), starlark.None}})
	if err != nil || v != starlark.None {
		t.Errorf("with default=None: %v, %v", v, err)
	}
	v, err = starlark.Call(th, dec, starlark.Tuple{starlark.String(`{"a": [1, 2.5, "x\"y"]}`)}, nil)
	if err != nil || v.String() != `{"a": [1, 2.5, "x\"y"]}` {
		t.Errorf("plain JSON: %v, %v", v, err)
	}
}

// Starlark's encoder wrote DEL as \x7f, which is not JSON: a request's
// json= body holding one was refused by the target (found by fuzzing).
func TestEncodedDELIsJSON(t *testing.T) {
	d := &fakeDoer{status: 200}
	rec, out := runAction(t, `
def act(user):
    if json.encode({"k\x7f": "a\x7fb\\x7f"}) != '{"k\\u007f":"a\\u007fb\\\\x7f"}':
        fail("json.encode: " + json.encode({"k\x7f": "a\x7fb\\x7f"}))
    user.http.post("/x", json={"t": "\x7f"})
`, d)
	if out != metrics.OK {
		t.Fatalf("outcome %v: %q", out, last(rec).Message)
	}
	if body := string(d.sent[0].Body); body != `{"t":"\u007f"}` || !json.Valid(d.sent[0].Body) {
		t.Errorf("json= body %q", body)
	}
}
