package scenario

import (
	"context"
	"os"
	"testing"
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
// checked against a real Mattermost by scripts/mattermost-e2e.sh.)
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
