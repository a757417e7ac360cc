package engine

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/mccutchen/go-httpbin/v2/httpbin"
	"go.starlark.net/starlark"
)

// engineIn writes files and the scenario src into a temporary directory
// and makes an engine of it against go-httpbin.
func engineIn(t *testing.T, files map[string]string, src string) (*Engine, *metrics.Recorder) {
	t.Helper()
	srv := httptest.NewServer(httpbin.New().Handler())
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)
	dir := t.TempDir()
	files["s.star"] = src
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := scenario.LoadFile(context.Background(), filepath.Join(dir, "s.star"), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	rec := metrics.NewRecorder(2, nil, time.Now)
	return New(Config{Scenario: sc, Target: target, Seed: 1, Grace: time.Second, Recorder: rec}), rec
}

func TestInitRunsOnceAndEveryUserReadsItsValue(t *testing.T) {
	e, rec := engineIn(t, map[string]string{}, `
def init(user):
    r = user.http.get("/uuid", name="GET /uuid")
    return {"uuid": r.json()["uuid"], "by": user.id}

def read(user):
    if user.shared["by"] != 0 or len(user.shared["uuid"]) != 36:
        fail("user.shared is %s" % user.shared)

actions = [action("Read", read)]
think_time = think.constant("10ms")
`)
	if err := e.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	shared, ok := e.Shared().(*starlark.Dict)
	if !ok {
		t.Fatalf("Shared() = %v, want init's dict", e.Shared())
	}
	e.SetUsers(3)
	snap := metrics.NewSnapshot()
	waitFor(t, "each user to read user.shared", func() bool {
		rec.Drain(snap)
		a := snap.Actions["Read"]
		return a != nil && a.Count >= 6
	})
	e.Stop()
	rec.Drain(snap)
	if a := snap.Actions["Read"]; a.Errors != 0 {
		t.Errorf("%d of %d reads of user.shared failed: %v", a.Errors, a.Count, a.Messages)
	}
	if r := snap.Requests["GET /uuid"]; r == nil || r.Count != 1 {
		t.Errorf("init's request was recorded %v times, want once", r)
	}
	if i := snap.Actions[scenario.InitAction]; i == nil || i.Count != 1 || i.Errors != 0 {
		t.Errorf("init's call recorded as %+v, want once, OK", i)
	}
	if err := shared.SetKey(starlark.String("x"), starlark.None); err == nil {
		t.Error("init's value could be written to after Init")
	}
}

func TestFailedOrCancelledInitReturnsItsError(t *testing.T) {
	e, _ := engineIn(t, map[string]string{}, "def init(user):\n    user.http.get('/status/503', name='GET /status/503')\ndef a(user):\n    pass\nactions = [action('A', a)]\n")
	err := e.Init(context.Background())
	var ie *scenario.InitError
	if !errors.As(err, &ie) || err.Error() != "the target's answer to a request of init: GET /status/503: status 503" {
		t.Errorf("Init: %v", err)
	}
	if e.Shared() != nil || e.Users() != 0 {
		t.Errorf("after a failed init: shared %v, %d users", e.Shared(), e.Users())
	}

	e, _ = engineIn(t, map[string]string{}, "def init(user):\n    sleep('1h')\ndef a(user):\n    pass\nactions = [action('A', a)]\n")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupted"))
	start := time.Now()
	err = e.Init(ctx)
	if !errors.As(err, &ie) || !ie.Canceled || err.Error() != "cancelled: interrupted" || time.Since(start) > 10*time.Second {
		t.Errorf("Init with a cancelled context: %v after %v", err, time.Since(start))
	}
}

// A user gives its dataset row back when it ends, so users added later
// find rows again.
func TestUniqueRowsAreGivenBackWhenUsersEnd(t *testing.T) {
	e, rec := engineIn(t, map[string]string{"u.csv": "name\nann\nbob\n"}, `
users = data.csv("u.csv", pick="unique")
def setup(user):
    user.state["me"] = users.row(user)["name"]
def a(user):
    pass
actions = [action("A", a)]
think_time = think.constant("10ms")
`)
	if err := e.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.SetUsers(2)
	waitFor(t, "two users set up", func() bool { return e.SetUp() == 2 })
	e.Stop()
	e.SetUsers(2) // users 3 and 4: they set up only with the rows users 1 and 2 gave back
	waitFor(t, "two more users set up", func() bool { return e.SetUp() == 4 })
	e.Stop()
	snap := metrics.NewSnapshot()
	rec.Drain(snap)
	if s := snap.Actions[scenario.SetupAction]; s.Errors != 0 {
		t.Errorf("%d setups failed: %v", s.Errors, s.Messages)
	}
}
