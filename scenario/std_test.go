package scenario

import (
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
	"go.starlark.net/starlark"
)

// eval evaluates a Starlark expression with the scenario's builtins, as
// the top level sees them.
func eval(t *testing.T, expr string) (starlark.Value, error) {
	t.Helper()
	th := &starlark.Thread{Name: "test"}
	return starlark.EvalOptions(execOptions(), th, "t.star", expr, predeclared())
}

func TestHelpersForRealAPIs(t *testing.T) {
	cases := []struct {
		expr, want string
	}{
		// url: a path segment keeps only the unreserved characters
		{`url.quote("#room:server")`, "%23room%3Aserver"},
		{`url.quote("a b/c~d_e.f-g")`, "a%20b%2Fc~d_e.f-g"},
		{`url.quote("/a b/", safe="/")`, "/a%20b/"},
		{`url.quote("é")`, "%C3%A9"},
		{`url.quote_plus("a b+c")`, "a+b%2Bc"},
		{`url.unquote("%23room%3Aserver+x")`, "#room:server+x"},
		{`url.unquote_plus("a+b%2Bc")`, "a b+c"},
		{`url.unquote(url.quote(b"\x00\xff ü/"))`, "\x00\xff ü/"},
		{`url.encode({"b": "x y", "a": 1})`, "b=x%20y&a=1"}, // dict order, not sorted
		{`url.encode([("q", "a&b=c"), ("f", 1.5), ("t", True)])`, "q=a%26b%3Dc&f=1.5&t=true"},
		{`url.encode({"id": [1, 2], "e": ""})`, "id=1&id=2&e="},
		// digests: the FIPS 180 "abc" vectors
		{`crypto.sha256("abc")`, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{`crypto.sha1(b"abc")`, "a9993e364706816aba3e25717850c26c9cd0d89d"},
		{`crypto.sha512("abc")[:32]`, "ddaf35a193617abacc417349ae204131"},
		// HMAC: RFC 2202 and RFC 4231, test case 2
		{`crypto.hmac("Jefe", "what do ya want for nothing?")`, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
		{`crypto.hmac("Jefe", "what do ya want for nothing?", hash="sha1")`, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"},
		{`crypto.hmac(b"Jefe", "what do ya want for nothing?", hash="sha512")[:32]`, "164b7a7bfcf819e2e395fbe73b56e0a3"},
		// base64: RFC 4648 vectors, both alphabets, with and without padding
		{`base64.encode("foob")`, "Zm9vYg=="},
		{`base64.encode("foob", pad=False)`, "Zm9vYg"},
		{`base64.encode(b"\xfb\xff", url=True)`, "-_8="},
		{`base64.encode(b"\xfb\xff")`, "+/8="},
		{`base64.decode("Zm9vYg==")`, "foob"},
		{`base64.decode("Zm9vYg")`, "foob"},
		{`base64.decode("-_8", url=True)`, "\xfb\xff"},
		{`base64.decode(base64.encode("user:päss"))`, "user:päss"},
	}
	for _, c := range cases {
		v, err := eval(t, c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if s, ok := v.(starlark.String); !ok || string(s) != c.want {
			t.Errorf("%s = %v, want %q", c.expr, v, c.want)
		}
	}
}

func TestHelpersRefuseBadInput(t *testing.T) {
	cases := []struct {
		expr, want string
	}{
		{`url.unquote("100%")`, `url.unquote: "%" at byte 3 is not an escape`},
		{`url.unquote("%zz")`, `"%zz" at byte 0 is not an escape`},
		{`url.encode({"a": None})`, `url.encode: key "a": value is a NoneType, want a string, number or bool`},
		{`url.encode("a=b")`, `url.encode: got a string, want a dict or a list of (key, value) pairs`},
		{`crypto.hmac("k", "d", hash="md5")`, `crypto.hmac: hash="md5": want "sha1", "sha256" or "sha512"`},
		{`crypto.sha256(1)`, `crypto.sha256: data is a int, want a string or bytes`},
		{`base64.decode("Zm9v!")`, `base64.decode: illegal base64 data at input byte 4: the alphabet is A-Z a-z 0-9 + /`},
		{`base64.decode("-_8", url=False)`, "illegal base64 data at input byte 0"},
		{`sleep("1s")`, "sleep is for setup, init, actions and teardown, not the top level"},
	}
	for _, c := range cases {
		_, err := eval(t, c.expr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.expr, err, c.want)
		}
	}
}

func TestUUIDIsVersion4AndFresh(t *testing.T) {
	v4 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 200 {
		v, err := eval(t, "uuid()")
		if err != nil {
			t.Fatal(err)
		}
		s := string(v.(starlark.String))
		if !v4.MatchString(s) {
			t.Fatalf("uuid() = %q, not an RFC 4122 version 4 UUID", s)
		}
		if seen[s] {
			t.Fatalf("uuid() gave %q twice", s)
		}
		seen[s] = true
	}
}

// newTestUser loads src plus one action A and makes user id of it.
func newTestUser(t *testing.T, src string, env Env) (*User, *samples) {
	t.Helper()
	sc, err := load("u.star", src+"\nactions = [action('A', act)]\n")
	if err != nil {
		t.Fatal(err)
	}
	rec := &samples{}
	if env.Record == nil {
		env.Record = rec
	}
	if env.HTTP == nil {
		env.HTTP = &fakeDoer{status: 200}
	}
	return NewUser(sc, env), rec
}

func TestClockReadsTheUsersClock(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 250e6, time.UTC)
	u, rec := newTestUser(t, `
def act(user):
    user.state["now"] = clock.now()
    user.state["ms"] = clock.millis()
`, Env{ID: 1, Now: func() time.Time { return at }})
	if out := u.Run(u.sc.Actions[0]); out != metrics.OK {
		t.Fatalf("%v: %+v", out, *rec)
	}
	now, _, _ := u.value.state.Get(starlark.String("now"))
	ms, _, _ := u.value.state.Get(starlark.String("ms"))
	if f, _ := starlark.AsFloat(now); f != float64(at.UnixNano())/1e9 {
		t.Errorf("clock.now() = %v, want %v", now, float64(at.UnixNano())/1e9)
	}
	if n, ok := ms.(starlark.Int).Int64(); !ok || n != at.UnixMilli() {
		t.Errorf("clock.millis() = %v, want %d", ms, at.UnixMilli())
	}
	v, err := eval(t, "clock.millis()") // at load: the wall clock
	if err != nil {
		t.Fatal(err)
	}
	n, _ := v.(starlark.Int).Int64()
	if d := time.Since(time.UnixMilli(n)); d < 0 || d > time.Minute {
		t.Errorf("clock.millis() at load is %v from now", d)
	}
}

// slowDoer answers after delay (of the bubble's clock, under synctest).
type slowDoer struct {
	fakeDoer
	delay time.Duration
}

func (s *slowDoer) Do(req *transport.Request, resp *transport.Response) {
	time.Sleep(s.delay)
	s.fakeDoer.Do(req, resp)
	resp.Latency = s.delay
}

func TestSleepIsLeftOutOfTheActionsLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, rec := newTestUser(t, `
def act(user):
    user.http.get("/a")
    sleep("1.5s")
    sleep(0.5)
    sleep(0)
    user.http.get("/b")
`, Env{ID: 1, HTTP: &slowDoer{fakeDoer: fakeDoer{status: 200}, delay: 40 * time.Millisecond}})
		start := time.Now()
		if out := u.Run(u.sc.Actions[0]); out != metrics.OK {
			t.Fatalf("%v: %+v", out, *rec)
		}
		if el := time.Since(start); el != 2080*time.Millisecond {
			t.Errorf("the action took %v, want 2.08 s: two 40 ms requests and 2 s of sleep", el)
		}
		a := (*rec)[len(*rec)-1]
		if a.Kind != metrics.Action || a.Latency != 80*time.Millisecond {
			t.Errorf("action sample %+v: want a latency of 80 ms, its requests without its sleep", a)
		}
	})
}

func TestSleepEndsWhenTheUserIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u, rec := newTestUser(t, `
def act(user):
    sleep("1h")
    user.http.get("/never")
`, Env{ID: 1})
		go func() {
			time.Sleep(10 * time.Millisecond)
			u.Cancel("user removed")
		}()
		start := time.Now()
		out := u.Run(u.sc.Actions[0])
		if el := time.Since(start); el != 10*time.Millisecond {
			t.Errorf("the sleeping action ended %v after it began, want 10 ms: at the cancel", el)
		}
		a := (*rec)[len(*rec)-1]
		if out != metrics.Canceled || a.Message != "cancelled: user removed" {
			t.Errorf("outcome %v, sample %+v: want cancelled, with the reason", out, a)
		}
		if len(*rec) != 1 {
			t.Errorf("%d samples: the request after the sleep was sent", len(*rec))
		}
		// A user already cancelled does not sleep at all.
		start = time.Now()
		if out := u.Run(u.sc.Actions[0]); out != metrics.Canceled || time.Since(start) != 0 {
			t.Errorf("after the cancel: outcome %v after %v, want cancelled at once", out, time.Since(start))
		}
	})
}

func TestSleepRefusesANegativeDuration(t *testing.T) {
	u, rec := newTestUser(t, "def act(user):\n    sleep(-1)\n", Env{ID: 1})
	if out := u.Run(u.sc.Actions[0]); out != metrics.Failed || !strings.Contains((*rec)[0].Message, "u.star:2: sleep: -1s is negative") {
		t.Errorf("outcome %v, samples %+v", out, *rec)
	}
}
