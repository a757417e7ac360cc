package engine

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
)

// Two agents' engines whose Config.IDs interleave run the users one engine
// would (ids 1..2k, each once) with the same mix of user types.
func TestInterleavedIDsAreOneRunsUsers(t *testing.T) {
	sc, err := scenario.Load(context.Background(), "ids.star", []byte(`
def act(user):
    pass
reader = user_type("reader", weight=3, actions=[action("Read", act)], think_time=think.constant("1h"))
poster = user_type("poster", actions=[action("Post", act)], think_time=think.constant("1h"))
user_types = [reader, poster]
`), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	const k, agents = 10, 2
	target, _ := url.Parse("http://127.0.0.1:1") // no request is sent
	run := func(ids func(int) int, n int) []int {
		var got []int
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			e := New(Config{Scenario: sc, Target: target, Seed: 1, Recorder: metrics.NewRecorder(1, nil, time.Now), Spread: -1, IDs: ids,
				OnAction: func(user int, _ string) { mu.Lock(); got = append(got, user); mu.Unlock() }})
			e.SetUsers(n)
			synctest.Wait()
			e.Stop()
		})
		slices.Sort(got)
		return got
	}
	one := run(nil, agents*k)
	var both []int
	byType := map[string]int{}
	for a := range agents {
		ids := func(n int) int { return a + 1 + (n-1)*agents }
		got := run(ids, k)
		both = append(both, got...)
		e := New(Config{Scenario: sc, Recorder: metrics.NewRecorder(1, nil, time.Now), IDs: ids})
		e.added = k // as if k users had been added
		for name, n := range e.UsersByType() {
			byType[name] += n
		}
	}
	slices.Sort(both)
	if !slices.Equal(one, both) || len(one) != agents*k {
		t.Errorf("one engine ran users %v; two interleaved, %v", one, both)
	}
	if want := sc.UsersByType(agents * k); !maps.Equal(byType, want) || want["reader"] != 15 {
		t.Errorf("users by type across agents %v, want one engine's %v", byType, want)
	}
}

// Users removed and added again take the accounts of those done before
// new ones: stepping 10 -> 4 -> 10 -> 6 -> 10 users signs up accounts
// 1..10 only (user.account), no more than the most users that ran at
// once, while each user's id (user.id) stays its own.
func TestAccountsAreReusedAfterTheirUsersAreDone(t *testing.T) {
	printed, _ := stepped(t, `
def setup(user):
    print("%d %d" % (user.id, user.account))
`, false, 10, 4, 10, 6, 10)
	ids, accounts := map[int]bool{}, map[int]bool{}
	for _, msg := range printed {
		var id, account int
		fmt.Sscanf(msg, "%d %d", &id, &account)
		if ids[id] {
			t.Errorf("id %d set up twice", id)
		}
		ids[id], accounts[account] = true, true
	}
	if got := slices.Sorted(maps.Keys(accounts)); len(got) != 10 || got[0] != 1 || got[9] != 10 {
		t.Errorf("accounts: %v, want 1..10", got)
	}
	if len(ids) != 10+6+4 {
		t.Errorf("%d ids set up, want %d: each user its own", len(ids), 10+6+4)
	}
}

// A user added in the place of one removed and done starts with the
// session it left (user.session): stepping 10 -> 4 -> 10 users logs in 10
// times, not 16, and 6 setups say their session was kept; with
// FreshSessions every user logs in.
func TestSessionsAreKeptForTheUsersAddedBack(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		logins, setup := stepped(t, `
def setup(user):
    if "token" not in user.session:
        print("login %d" % user.account)
        user.session["token"] = "t-%d" % user.account
`, fresh, 10, 4, 10)
		kept := int64(0)
		if a := setup.Actions[scenario.SessionKeptAction]; a != nil {
			kept = a.Count
		}
		want, wantKept := 10, int64(6)
		if fresh {
			want, wantKept = 16, 0
		}
		if len(logins) != want || kept != wantKept {
			t.Errorf("FreshSessions %v: %d logins, %d sessions kept; want %d and %d", fresh, len(logins), kept, want, wantKept)
		}
	}
}

// A pick="unique" dataset gives a user added in the place of one removed
// that one's row (by user.account): stepping 10 -> 4 -> 10 users with 30
// rows uses rows 1..10 only, so the accounts the rows name, and their
// kept sessions, are reused rather than new ones logged in.
func TestUniqueRowsFollowTheAccounts(t *testing.T) {
	printed, _ := stepped(t, `
accounts = data.rows([{"name": "member-%d" % i} for i in range(1, 31)], pick="unique")
def setup(user):
    print(accounts.row(user)["name"])
`, false, 10, 4, 10)
	names := map[string]int{}
	for _, n := range printed {
		names[n]++
	}
	if len(names) != 10 || names["member-10"] != 2 || names["member-1"] != 1 {
		t.Errorf("rows taken %v: want member-1..10 only, the last six twice", names)
	}
}

// stepped runs, in virtual time, users of a scenario of setupSrc (its
// setup, and what it needs) and one action that does nothing, through the
// user counts ns (stepThrough), and returns what their setups printed and
// the setups' samples. No request is sent.
func stepped(t *testing.T, setupSrc string, fresh bool, ns ...int) (printed []string, setup *metrics.Snapshot) {
	t.Helper()
	sc, err := scenario.Load(context.Background(), "stepped.star", []byte(setupSrc+`
def act(user):
    pass
actions = [action("Act", act)]
think_time = think.constant("100ms")
`), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("http://127.0.0.1:1")
	snap := metrics.NewSnapshot()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		rec := metrics.NewRecorder(1, nil, time.Now)
		e := New(Config{Scenario: sc, Target: target, Seed: 1, Recorder: rec, Grace: time.Second, FreshSessions: fresh,
			Print: func(_ int, msg string) { mu.Lock(); printed = append(printed, msg); mu.Unlock() }})
		stepThrough(e, ns...)
		e.Stop()
		rec.Drain(snap)
	})
	if snap.Setup == nil {
		snap.Setup = metrics.NewSnapshot()
	}
	return printed, snap.Setup
}

// stepThrough sets e's users to each of ns in turn, each time waiting past
// the grace period (1 s in these tests), so the users removed are done
// before more are added. In a synctest bubble.
func stepThrough(e *Engine, ns ...int) {
	for _, n := range ns {
		e.SetUsers(n)
		time.Sleep(3 * time.Second)
		synctest.Wait()
	}
}
