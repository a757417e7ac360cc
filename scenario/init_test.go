package scenario

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"go.starlark.net/starlark"
)

// runInit loads src (plus an action A running act) and runs its init as
// the engine does, with a user of id 0.
func runInit(t *testing.T, src string, d *fakeDoer) (*Scenario, starlark.Value, *samples, error) {
	t.Helper()
	sc, err := load("i.star", src+"\nactions = [action('A', act)]\n")
	if err != nil {
		t.Fatal(err)
	}
	rec := &samples{}
	u := NewUser(sc, Env{ID: 0, Seed: 1, HTTP: d, Record: rec})
	defer u.Close()
	v, err := u.Init()
	return sc, v, rec, err
}

func TestInitValueIsSharedAndFrozen(t *testing.T) {
	d := &fakeDoer{status: 200, body: `{"room_id": "!r:x"}`}
	sc, v, rec, err := runInit(t, `
def init(user):
    r = user.http.post("/createRoom", json={"id": user.id}, name="POST /createRoom")
    return {"rooms": [r.json()["room_id"]], "n": 2, "pair": (1, "a"), "tags": set(["x"])}

def act(user):
    if user.state.get("write"):
        user.shared["rooms"].append("!other:x")
    user.state["out"] = user.shared["rooms"][0]
`, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.sent) != 1 || string(d.sent[0].Body) != `{"id":0}` {
		t.Errorf("init sent %+v: want one request, by the user of id 0", d.sent)
	}
	names := []string{}
	for _, s := range *rec {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "POST /createRoom,"+InitAction {
		t.Errorf("init recorded %v, want its request then %s", names, InitAction)
	}
	for _, write := range []bool{false, true} {
		urec := &samples{}
		u := NewUser(sc, Env{ID: 1, HTTP: &fakeDoer{}, Record: urec, Shared: v})
		_ = u.value.state.SetKey(starlark.String("write"), starlark.Bool(write))
		out := u.Run(sc.Actions[0])
		if !write {
			got, _, _ := u.value.state.Get(starlark.String("out"))
			if out != metrics.OK || got != starlark.String("!r:x") {
				t.Errorf("a user read user.shared: %v %v %+v", out, got, *urec)
			}
			continue
		}
		if out != metrics.Failed || !strings.Contains((*urec)[0].Message, "frozen") {
			t.Errorf("a user wrote to user.shared: %v %+v, want a failure for a frozen list", out, *urec)
		}
	}
}

func TestNoInitSharesNone(t *testing.T) {
	sc, v, rec, err := runInit(t, "def act(user):\n    user.state['out'] = user.shared\n", &fakeDoer{})
	if err != nil || v != starlark.None || len(*rec) != 0 {
		t.Fatalf("without init: %v %v %+v", v, err, *rec)
	}
	u, out, s := act(t, sc, 1)
	_ = u
	if s.Outcome != metrics.OK || out != starlark.None {
		t.Errorf("user.shared without init: %v (%v %s), want None", out, s.Outcome, s.Message)
	}
}

func TestInitFailuresSayWhose(t *testing.T) {
	cases := []struct {
		name, src string
		status    int
		want      string
	}{
		{"code", "def init(user):\n    return {}['x']\n", 200,
			`the scenario's init: i.star:2: key "x" not in dict`},
		{"fail", "def init(user):\n    fail('no admin')\n", 200, "the scenario's init: no admin"},
		{"request", "def init(user):\n    user.http.post('/createRoom', name='POST /createRoom')\n    return 1\n", 403,
			"the target's answer to a request of init: POST /createRoom: status 403"},
		{"code after request", "def init(user):\n    return user.http.get('/r', name='GET /r').json()['id']\n", 500,
			`the scenario's init: i.star:2: key "id" not in dict (after the target's answer to a request of init: GET /r: status 500)`},
		{"a user", "def init(user):\n    return {'me': [user]}\n", 200,
			`the scenario's init: i.star:1: init returned a user at ["me"][0]: return plain data`},
		{"a response", "def init(user):\n    return [1, user.http.get('/')]\n", 200, "the scenario's init: i.star:1: init returned a response at [1]: return plain data (None, bools"},
		{"a function", "def init(user):\n    return init\n", 200, "the scenario's init: i.star:1: init returned a function: return plain data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, v, rec, err := runInit(t, c.src+"def act(user):\n    pass\n", &fakeDoer{status: c.status, body: "{}"})
			var ie *InitError
			if !errors.As(err, &ie) || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v, want an InitError %q", err, c.want)
			}
			if v != nil {
				t.Errorf("a failed init returned %v", v)
			}
			if last := (*rec)[len(*rec)-1]; last.Name != InitAction || last.Outcome != metrics.Failed {
				t.Errorf("init's own sample %+v, want %s failed", last, InitAction)
			}
		})
	}
}

func TestInitSharesCyclesAndDatasets(t *testing.T) {
	sc, err := scenarioIn(t, map[string]string{"u.csv": usersCSV}, `
users = data.csv("u.csv")
def init(user):
    l = [users]
    l.append(l)  # a list that holds itself: walked once
    return l
def act(user):
    user.state["out"] = user.shared[0][1]["name"]
`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	u := NewUser(sc, Env{ID: 0, HTTP: &fakeDoer{}, Record: &samples{}})
	v, err := u.Init()
	if err != nil {
		t.Fatal(err)
	}
	rec := &samples{}
	user := NewUser(sc, Env{ID: 1, HTTP: &fakeDoer{}, Record: rec, Shared: v})
	user.Run(sc.Actions[0])
	if got, _, _ := user.value.state.Get(starlark.String("out")); got != starlark.String("bob") {
		t.Errorf("read %v through user.shared (%+v), want bob", got, *rec)
	}
}

func TestInitIsCancelledInASleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, err := load("i.star", "def init(user):\n    sleep('1h')\n    return 1\ndef act(user):\n    pass\nactions = [action('A', act)]\n")
		if err != nil {
			t.Fatal(err)
		}
		u := NewUser(sc, Env{ID: 0, HTTP: &fakeDoer{}, Record: &samples{}})
		go func() {
			time.Sleep(time.Second)
			u.Cancel("interrupted")
		}()
		start := time.Now()
		_, err = u.Init()
		var ie *InitError
		if !errors.As(err, &ie) || !ie.Canceled || err.Error() != "cancelled: interrupted" || time.Since(start) != time.Second {
			t.Errorf("after %v: %v, want cancelled at 1 s", time.Since(start), err)
		}
	})
}
