package scenario

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario/ws"
	"github.com/headroom-dev/headroom/transport"
)

// referenceFrequencies are the action frequencies of LT-ng v1.32.0's
// simulative controller (loadtest/control/simulcontroller/controller.go,
// getActionList) for the actions examples/mattermost.star makes: all of
// 0.004 and more but UpdateCustomAttribute, which an unlicensed server
// refuses.
var referenceFrequencies = map[string]float64{
	"SwitchChannel": 6.5219, "ScrollChannel": 1.9873, "DeleteDraft": 1.41, "UnreadCheck": 1, "CreatePost": 1,
	"OpenDirectOrGroupChannel": 0.9843, "ViewGlobalThreads": 0.6023, "UpsertDraft": 0.504, "UpdateThreadRead": 0.3236,
	"ClickPermalink": 0.3, "ViewThread": 0.2841, "ReconnectWebSocket": 0.144, "AddReaction": 0.1306, "EditPost": 0.0400,
	"GetDrafts": 0.037, "SearchUsers": 0.0320, "ClickUserProfile": 0.03, "SearchPosts": 0.0218, "SearchGroupChannels": 0.0204,
	"SearchChannels": 0.0150, "CreateDirectChannel": 0.0055, "UnfollowThread": 0.0050, "JoinChannel": 0.0049, "DeletePost": 0.0049,
	"UpdateSidebarCategory": 0.0040,
}

// The Mattermost example loads, with its settings, and makes the
// reference's actions at the reference's frequencies. (Its requests are
// checked against a fake below and a real Mattermost by
// scripts/mattermost-e2e.sh.)
func TestMattermostExampleLoads(t *testing.T) {
	src, err := os.ReadFile("../examples/mattermost.star")
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"team": "t", "accounts": "100", "rate": "1", "min_idle": "2", "avg_idle": "30", "data": "yes",
		"channels": "40", "joins": "3", "join_share": "0.5", "posts": "8000", "dms": "10", "site": "https://chat.example"}
	for _, vars := range []map[string]string{nil, all} {
		sc, err := Load(context.Background(), "mattermost.star", src, Limits{Vars: vars})
		if err != nil {
			t.Fatalf("vars %v: %v", vars, err)
		}
		got := map[string]float64{}
		for _, a := range sc.Actions {
			got[a.Name] = a.Weight
		}
		for name, w := range referenceFrequencies {
			if got[name] != w {
				t.Errorf("%s: weight %v, want the reference's %v", name, got[name], w)
			}
		}
		if len(got) != len(referenceFrequencies) {
			t.Errorf("%d actions, want the reference's %d: %v", len(got), len(referenceFrequencies), got)
		}
	}
}

// The example's helpers run against a fake of the Mattermost API (its
// routes, statuses and answers' shapes, mattermost_fake_test.go), in
// virtual time (the script's pauses and its every-minute lanes cost
// nothing): the data phase twice (the second adds nothing), then every
// action three times over for each user, with the WebSocket's events
// handled after each; not one request the fake does not know or answers
// with a status the script did not expect, every route called, and every
// action but DeleteDraft (a pick that sends nothing, as the script says)
// sending requests.
func TestMattermostExampleRuns(t *testing.T) {
	src, err := os.ReadFile("../examples/mattermost.star")
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		mm := newFakeMattermost()
		target, dial := &url.URL{Scheme: "http", Host: "mattermost.invalid"}, memhttp.Dial(t, mm.handler())
		client := func(cookies map[string]string) HTTPClient {
			return transport.NewClient(transport.Options{Target: target, Timeout: 5 * time.Second, Dial: dial, Cookies: cookies})
		}
		// 4 accounts in 3 channels load-N, 2 of them each; accounts 3 and 4 open a direct channel with 1 and 2;
		// 300 posts each, for 1% of the roots to carry an image often enough that one is uploaded and seen
		const accounts, posts, joins, dms = 4, 300, 2, 2
		vars := map[string]string{"data": "yes", "accounts": fmt.Sprint(accounts), "channels": "3", "joins": fmt.Sprint(joins), "join_share": "1",
			"posts": fmt.Sprint(posts), "dms": fmt.Sprint(dms)}
		rec := &lockedSamples{}
		start := func() []*User {
			sc, err := Load(context.Background(), "mattermost.star", src, Limits{Vars: vars})
			if err != nil {
				t.Fatal(err)
			}
			var users []*User
			for id := 1; id <= 5; id++ { // user 5 is another session of account 1
				c := client(nil)
				u := NewUser(sc, Env{ID: id, Seed: 1, HTTP: c, NewHTTP: client, Record: rec, WS: ws.Dialing{Target: target, Timeout: 5 * time.Second, Dial: dial}})
				t.Cleanup(func() { u.Close(); c.Close() })
				if out := u.Setup(); out != metrics.OK {
					t.Fatalf("user %d's setup: %v: %v", id, out, rec.failures())
				}
				users = append(users, u)
			}
			return users
		}

		for _, u := range start() {
			u.Close()
		}
		data := mm.dataSet()
		if want := accounts * posts; data.posts != want || data.replies == 0 || data.files == 0 {
			t.Fatalf("the data phase made %d posts, %d of them replies, %d uploads: want %d, some replies and uploads", data.posts, data.replies, data.files, want)
		}
		for n := 1; n <= accounts; n++ {
			in := data.member[fmt.Sprintf("user-%d", n)]
			if !in["town-square"] || !in["off-topic"] {
				t.Errorf("user-%d is in %v, want town-square and off-topic", n, in)
			}
			loads := 0
			for name := range in {
				if strings.HasPrefix(name, "load-") {
					loads++
				}
			}
			if loads != joins {
				t.Errorf("user-%d is in %d channels load-N, want %d: %v", n, loads, joins, in)
			}
			var want []string
			if n > dms && n <= 2*dms {
				want = []string{fmt.Sprintf("user-%d", n-dms)}
			} else if n <= dms {
				want = []string{fmt.Sprintf("user-%d", n+dms)}
			}
			if got := data.direct[fmt.Sprintf("user-%d", n)]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("user-%d has direct channels with %v, want %v", n, got, want)
			}
		}

		mm.seedPermalinks()
		before := mm.dataSet()
		users := start()
		if again := mm.dataSet(); again.posts != before.posts || again.channels != before.channels || again.files != before.files {
			t.Fatalf("the data phase again made %d posts, %d channels, %d uploads, want none: %+v, then %+v",
				again.posts-before.posts, again.channels-before.channels, again.files-before.files, before, again)
		}
		handle := func() {
			synctest.Wait() // the events the last action caused have arrived
			for _, u := range users {
				for m := u.NextMessage(); m != nil; m = u.NextMessage() {
					if out := u.Handle(m); out != metrics.OK {
						t.Fatalf("handling a message: %v: %v", out, rec.failures())
					}
				}
			}
		}
		sc := users[0].sc
		for range 3 {
			for _, a := range sc.Actions {
				for _, u := range users {
					if out := u.Run(a); out != metrics.OK {
						t.Fatalf("%s: %v: %v", a.Name, out, rec.failures())
					}
					handle()
				}
			}
		}
		time.Sleep(2 * time.Minute) // the every-minute lanes' first calls
		handle()

		if f := rec.failures(); len(f) > 0 {
			t.Errorf("samples that failed: %v", f)
		}
		sent := map[string]int{}
		for _, s := range rec.all() {
			if s.Kind == metrics.Action {
				sent[s.Name] += s.Requests
			}
		}
		for _, a := range sc.Actions {
			if sent[a.Name] == 0 && a.Name != "DeleteDraft" {
				t.Errorf("%s sent no request in 3 rounds of 5 users: a helper that does nothing?", a.Name)
			}
		}
		for _, lane := range []string{"statuses", "performance report"} {
			if sent[LaneAction(lane)] < len(users) {
				t.Errorf("the lane %q sent %d requests for %d users in 2 minutes", lane, sent[LaneAction(lane)], len(users))
			}
		}
		if n := rec.count("posted", metrics.Delivery); n == 0 {
			t.Error("no post's delivery timed")
		}
		typing := 0
		for _, s := range rec.all() {
			if s.Kind == metrics.MessageIn && s.Type == "typing" {
				typing++
			}
		}
		if typing == 0 {
			t.Error("no typing event arrived")
		}

		mm.mu.Lock()
		defer mm.mu.Unlock()
		if len(mm.wrong) > 0 {
			t.Errorf("requests the server would refuse: %v", mm.wrong)
		}
		for pattern := range mm.table {
			if mm.hits[pattern] == 0 {
				t.Errorf("%s never called: a helper that does nothing?", pattern)
			}
		}
		for _, hit := range []string{"WS presence", "WS user_typing"} {
			if mm.hits[hit] == 0 {
				t.Errorf("no %s sent", hit)
			}
		}
		if n := mm.hits["GET /api/v4/websocket"]; n != 10 {
			t.Errorf("%d WebSocket connections for 5 users twice", n)
		}
	})
}

// fakeDataSet is what the fake holds that the data phase makes.
type fakeDataSet struct {
	posts, replies, files, channels int                        // posts and replies of the users, not the system's
	member                          map[string]map[string]bool // username -> names of its team's channels
	direct                          map[string][]string        // username -> those it has a direct channel with
}

func (m *fakeMattermost) dataSet() fakeDataSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := fakeDataSet{files: len(m.files), channels: len(m.channels), member: map[string]map[string]bool{}, direct: map[string][]string{}}
	for _, p := range m.posts {
		if p.Type == "" {
			d.posts++
			if p.Root != "" {
				d.replies++
			}
		}
	}
	for _, c := range m.channels {
		for id := range c.Members {
			name := m.users[id].Name
			if c.Type == "O" {
				if d.member[name] == nil {
					d.member[name] = map[string]bool{}
				}
				d.member[name][c.Name] = true
				continue
			}
			for other := range c.Members {
				if other != id {
					d.direct[name] = append(d.direct[name], m.users[other].Name)
				}
			}
		}
	}
	return d
}

// failures are the samples that did not succeed, as "name: message".
func (l *lockedSamples) failures() (out []string) {
	for _, s := range l.all() {
		if s.Outcome != metrics.OK {
			out = append(out, fmt.Sprintf("%s (%d): %s", s.Name, s.Status, s.Message))
		}
	}
	return out
}
