package scenario

import (
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/headroom-dev/headroom/metrics"
)

// sessionScenario logs in (a request) only when user.session has no token;
// an action can make the server forget it ("expire") or store a value that
// cannot be kept.
const sessionScenario = `
def setup(user):
    s = user.session
    if s.get("expired"):
        s.clear()
        fail("the server forgot the session")
    if "token" not in s:
        user.http.post("/login")
        s["token"] = "t-%d" % user.account
        s["seen"] = []
    s["seen"].append(user.id)  # the user's own copy: the kept one is not changed by it
    user.http.headers["Authorization"] = "Bearer " + s["token"]
def act(user):
    if user.state.get("expire"):
        user.session["expired"] = True
    if user.state.get("keep_a_function"):
        user.session["f"] = act
actions = [action("A", act)]
`

// A user's session is what the account's user before it left, whatever
// that user's id; a nil Sessions keeps nothing; a failed setup's session
// is the retry's; a value that cannot be kept fails the setup that put it
// there, naming the key, and leaves the next user none.
func TestSessionOutlivesItsUser(t *testing.T) {
	sc, err := load("s.star", sessionScenario)
	if err != nil {
		t.Fatal(err)
	}
	logins := func(d *fakeDoer) int { return strings.Count(fmtSent(d), "/login") }
	sessions := NewSessions()
	newUser := func(id, account int, d *fakeDoer, rec *samples, ss *Sessions) *User {
		return NewUser(sc, Env{ID: id, Account: account, Sessions: ss, Seed: 1, HTTP: d, Record: rec})
	}
	d, rec := &fakeDoer{status: 200}, &samples{}
	a := newUser(1, 1, d, rec, sessions)
	if a.Setup() != metrics.OK || logins(d) != 1 {
		t.Fatalf("first user: %d logins, samples %+v", logins(d), *rec)
	}
	a.Close()
	b := newUser(7, 1, d, rec, sessions) // another id, the same account
	if out := b.Setup(); out != metrics.OK || logins(d) != 1 {
		t.Errorf("the account's second user: %v, %d logins: want the first's token, no login", out, logins(d))
	}
	if n := countNamed(*rec, SessionKeptAction); n != 1 {
		t.Errorf("%d %q samples, want 1 (the second user's)", n, SessionKeptAction)
	}
	if v, _, _ := sessions.kept[1].Get(starlark.String("seen")); v == nil || v.String() != "[1, 7]" {
		t.Errorf("kept seen = %v, want [1, 7]: each user's setup appended its id to its own copy", v)
	}
	if c := newUser(8, 2, d, rec, sessions); c.Setup() != metrics.OK || logins(d) != 2 {
		t.Errorf("another account: %d logins, want its own", logins(d))
	}
	if e := newUser(9, 1, d, rec, nil); e.Setup() != metrics.OK || logins(d) != 3 {
		t.Errorf("no Sessions (--fresh-sessions): %d logins, want a login of its own", logins(d))
	}

	// The server forgets the session: the setup clears it and fails, the retry logs in.
	b.value.state.SetKey(starlark.String("expire"), starlark.True)
	b.Run(sc.Actions[0])
	b.Close()
	f := newUser(10, 1, d, rec, sessions)
	if f.Setup() != metrics.Failed {
		t.Fatalf("a setup on a forgotten session should fail")
	}
	if g := newUser(10, 1, d, rec, sessions); g.Setup() != metrics.OK || logins(d) != 4 {
		t.Errorf("the retry after a forgotten session: %d logins, want one more", logins(d))
	} else {
		g.value.state.SetKey(starlark.String("keep_a_function"), starlark.True)
		g.Run(sc.Actions[0])
		g.Close()
	}
	if sessions.kept[1] != nil {
		t.Errorf("a session holding a function was kept: %v", sessions.kept[1])
	}
	bad, err := load("b.star", "def setup(user):\n    user.session[\"f\"] = setup\ndef act(user):\n    pass\nactions = [action('A', act)]\n")
	if err != nil {
		t.Fatal(err)
	}
	rec = &samples{}
	if out := NewUser(bad, Env{ID: 1, Sessions: sessions, Seed: 1, HTTP: d, Record: rec}).Setup(); out != metrics.Failed ||
		!strings.Contains((*rec)[0].Message, `user.session["f"] is a function`) {
		t.Errorf("a function in user.session: %v %+v, want the setup failed, the key named", out, *rec)
	}
}

func countNamed(s samples, name string) int {
	n := 0
	for _, x := range s {
		if x.Name == name {
			n++
		}
	}
	return n
}

func fmtSent(d *fakeDoer) string {
	var b strings.Builder
	for _, r := range d.sent {
		b.WriteString(r.URL + "\n")
	}
	return b.String()
}
