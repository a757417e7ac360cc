package scenario

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/transport"
)

// referenceFrequencies are the ceiling report's action frequencies
// (ceiling-tests-v2-report.md, "Action frequencies") of the actions
// examples/mattermost.star makes: all of 0.004 and more.
var referenceFrequencies = map[string]float64{
	"SwitchChannel": 6.5219, "ScrollChannel": 1.9873, "UnreadCheck": 1, "CreatePost": 1, "OpenDirectOrGroupChannel": 0.9843,
	"ViewGlobalThreads": 0.6023, "UpdateThreadRead": 0.3236, "ClickPermalink": 0.3, "ViewThread": 0.2841, "ReconnectWebSocket": 0.144,
	"AddReaction": 0.1306, "EditPost": 0.0400, "SearchUsers": 0.0320, "ClickUserProfile": 0.03, "SearchPosts": 0.0218,
	"SearchGroupChannels": 0.0204, "SearchChannels": 0.0150, "CreateDirectChannel": 0.0055, "UnfollowThread": 0.0050,
	"JoinChannel": 0.0049, "DeletePost": 0.0049, "UpdateSidebarCategory": 0.0040,
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
	for _, vars := range []map[string]string{nil, {"accounts": "100", "rate": "1", "data": "yes", "channels": "40", "posts": "8000", "team": "t", "joins": "3"}} {
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
// routes and answers' shapes, mattermost_fake_test.go): the data phase
// twice (the second adds nothing), then every action three times over for
// each user, with the posts' events handled, and not one request the
// fake does not know or answers with a status the script did not expect.
func TestMattermostExampleRuns(t *testing.T) {
	mm, target := newFakeMattermost(t)
	src, err := os.ReadFile("../examples/mattermost.star")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"data": "yes", "channels": "3", "posts": "12", "joins": "2", "accounts": "4"}
	rec := &lockedSamples{}
	newUser := func(sc *Scenario, id int) *User {
		c := transport.NewClient(transport.Options{Target: target, Timeout: 5 * time.Second})
		u := NewUser(sc, Env{ID: id, Seed: 1, HTTP: c, Record: rec, Target: target, Timeout: 5 * time.Second})
		t.Cleanup(func() { u.Close(); c.Close() })
		if out := u.Setup(); out != metrics.OK {
			t.Fatalf("user %d's setup: %v: %v", id, out, rec.failures())
		}
		return u
	}
	count := func() (posts int) {
		mm.mu.Lock()
		defer mm.mu.Unlock()
		return len(mm.posts)
	}
	for pass := range 2 {
		sc, err := Load(context.Background(), "mattermost.star", src, Limits{Vars: vars})
		if err != nil {
			t.Fatal(err)
		}
		var users []*User
		for id := 1; id <= 5; id++ { // user 5 is another session of account 1
			users = append(users, newUser(sc, id))
		}
		if pass == 0 {
			// 12 posts over 3 channels, the first of each with a reply
			if n := count(); n != 3*(4+1) {
				t.Fatalf("the data phase made %d posts, want 15", n)
			}
			continue
		}
		if n := count(); n != 15 {
			t.Fatalf("the data phase again: %d posts, want the same 15", n)
		}
		for range 3 {
			for _, a := range sc.Actions {
				for _, u := range users {
					if out := u.Run(a); out != metrics.OK {
						t.Fatalf("%s: %v: %v", a.Name, out, rec.failures())
					}
					for m := u.NextMessage(); m != nil; m = u.NextMessage() {
						if out := u.Handle(m); out != metrics.OK {
							t.Fatalf("handling a message: %v: %v", out, rec.failures())
						}
					}
				}
			}
		}
	}
	if f := rec.failures(); len(f) > 0 {
		t.Errorf("samples that failed: %v", f)
	}
	mm.mu.Lock()
	defer mm.mu.Unlock()
	if len(mm.wrong) > 0 {
		t.Errorf("requests the server would refuse: %v", mm.wrong)
	}
	for pattern := range mm.routes() {
		if mm.hits[pattern] == 0 {
			t.Errorf("%s never called: a helper that does nothing?", pattern)
		}
	}
	// the posts' events arrived and were handled: delivery timed, the channel on screen viewed
	if n := rec.count("posted", metrics.Delivery); n == 0 {
		t.Error("no post's delivery timed")
	}
	if mm.hits["GET /api/v4/websocket"] < 5 {
		t.Errorf("%d WebSocket connections for 5 users", mm.hits["GET /api/v4/websocket"])
	}
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
