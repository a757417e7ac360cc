package runner

import (
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
)

func TestUserTypesAreInTheResult(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, `
def read(user):
    user.http.get("/get", name="read")
def skip(user):
    pass
def post(user):
    user.http.post("/post", name="post")
reader = user_type("reader", weight=9, actions=[action("Read", read), action("Skip", skip)], think_time=think.constant("50ms"))
poster = user_type("poster", actions=[action("Post", post)], think_time=think.constant("50ms"))
user_types = [reader, poster]
`)
	out := filepath.Join(t.TempDir(), "r")
	run(t, &Bounded{Common: Common{Scenario: sc, Target: target, Out: out}, Users: 10, Duration: time.Second})
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"reader": 9, "poster": 1}; !maps.Equal(res.UsersByType, want) {
		t.Errorf("users_by_type %v, want %v", res.UsersByType, want)
	}
	types := res.Config.UserTypes
	if len(types) != 2 || types[0].Name != "reader" || types[0].Weight != 9 || len(types[0].Actions) != 2 ||
		types[1].Name != "poster" || types[1].Weight != 1 || types[1].Think != `think.constant("50ms")` {
		t.Errorf("config.user_types %+v", types)
	}
	if len(res.Config.Actions) != 0 || res.Config.Think != "" {
		t.Errorf("config.actions %v and think %q beside user_types, want them empty", res.Config.Actions, res.Config.Think)
	}
	got := map[string]int64{}
	for _, a := range res.Actions {
		got[a.Name] = a.Count
		if a.Name == "Skip" && (a.Count == 0 || a.NoRequest != a.Count) {
			t.Errorf("Skip: %d of %d sent no request, want all", a.NoRequest, a.Count)
		}
		if a.Name != "Skip" && a.NoRequest != 0 {
			t.Errorf("%s: %d without a request, want none", a.Name, a.NoRequest)
		}
	}
	if got["Post"] == 0 || got["Read"] == 0 {
		t.Errorf("actions %v: both types should have acted", got)
	}
}

func TestConfigOfOneUserType(t *testing.T) {
	sc := load(t, "def a(user):\n    pass\nactions = [action('A', a, weight=2), action('B', a)]\nthink_time = think.constant('2s')\n")
	var cfg result.Config
	configTypes(&cfg, sc)
	if cfg.Think != `think.constant("2s")` || len(cfg.Actions) != 2 || cfg.Actions[0] != (result.ActionWeight{Name: "A", Weight: 2}) || cfg.UserTypes != nil {
		t.Errorf("config %+v: want the one type's think time and actions, and no user_types", cfg)
	}
}
