package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/scenario"
)

// counting is a target that answers 200 and counts what it was sent.
func counting(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Write([]byte(`{"room_id": "!r:x"}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

const uniqueScenario = `
users = data.csv("users.csv", pick="unique")
def init(user):
    return {"room": user.http.post("/createRoom", name="POST /createRoom").json()["room_id"]}
def setup(user):
    user.state["me"] = users.row(user)["name"]
def a(user):
    if user.shared["room"] != "!r:x":
        fail("user.shared: %s" % user.shared)
    user.http.get("/rooms/" + url.quote(user.shared["room"]), name="GET /rooms/{id}")
actions = [action("A", a)]
think_time = think.constant("100ms")
`

// Before any traffic, a run of more users than a unique dataset has rows
// is refused, naming the file and both numbers.
func TestUniqueDataRefusesMoreUsersThanRows(t *testing.T) {
	srv, sent := counting(t)
	dir := t.TempDir()
	write(t, dir, "users.csv", "name\nann\nbob\n")
	sc := write(t, dir, "s.star", uniqueScenario)
	for _, c := range []struct {
		args []string
		what string
	}{
		{[]string{"run", sc, "--users", "3"}, "--users 3"},
		{[]string{"step", sc, "--levels", "1,3"}, "--levels up to 3 users"},
		{[]string{"ceiling", sc, "--max-users", "5"}, "--max-users 5"},
	} {
		out := filepath.Join(dir, "out")
		code, stdout, stderr := headroom(t, append(c.args, "--target", srv.URL, "--out", out, "--quiet")...)
		want := c.what + `: data file users.csv (pick="unique", s.star:2) has 2 rows, one per running user` + "\n" +
			"  fix: add rows to it, or run at most 2 users"
		if code != ExitUsage || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, want %d and %q\n%s%s", c.args[:1], code, ExitUsage, want, stdout, stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: %s was created", c.args[:1], out)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d requests were sent before the refusal", n)
	}
}

func TestDefaultMaxUsersIsLoweredToTheRows(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "users.csv", "name\nann\nbob\n")
	sc, err := scenario.LoadFile(t.Context(), write(t, dir, "s.star", uniqueScenario), scenario.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var e bytes.Buffer
	if n := maxUsersForData(Env{Stderr: &e}, sc, 10000); n != 2 || !strings.Contains(e.String(), "note: --max-users lowered from 10000 to 2: data file users.csv") {
		t.Errorf("maxUsersForData: %d, %q", n, e.String())
	}
	e.Reset()
	if n := maxUsersForData(Env{Stderr: &e}, sc, 2); n != 2 || e.Len() != 0 {
		t.Errorf("maxUsersForData with enough rows: %d, %q", n, e.String())
	}
}

// init runs once before the users, who read its value and their own
// rows; the result's hash covers the data file.
func TestRunWithInitAndData(t *testing.T) {
	srv, _ := counting(t)
	dir := t.TempDir()
	write(t, dir, "users.csv", "name\nann\nbob\n")
	src := write(t, dir, "s.star", uniqueScenario)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := headroom(t, "run", src, "--target", srv.URL, "--users", "2", "--duration", "1s", "--out", out, "--quiet", "--no-report")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]metrics.Summary{}
	for _, r := range res.Requests {
		byName[r.Name] = r
	}
	// init's request is setup's: in the setup section, not the window.
	if r, ok := byName["POST /createRoom"]; ok {
		t.Errorf("init's request counted in the window: %+v", r)
	}
	var initReq int64
	if res.Setup != nil {
		for _, r := range res.Setup.Requests {
			if r.Name == "POST /createRoom" {
				initReq = r.Count
			}
		}
	}
	if initReq != 1 {
		t.Errorf("init's request counted %d times in the setup section, want once", initReq)
	}
	if r := byName["GET /rooms/{id}"]; r.Count == 0 || r.Errors != 0 {
		t.Errorf("the users' requests: %+v", r)
	}
	b, _ := os.ReadFile(src)
	sum := sha256.Sum256(b)
	if res.Config.ScenarioHash == "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("the scenario's hash %s is its source's alone: the data file is not in it", res.Config.ScenarioHash)
	}
}

// A failing init stops the run before any user starts, saying whose fault
// it is.
func TestFailingInitStopsTheRun(t *testing.T) {
	srv, sent := counting(t)
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def init(user):\n    fail('no admin token')\ndef a(user):\n    user.http.get('/')\nactions = [action('A', a)]\n")
	out := filepath.Join(dir, "out")
	code, stdout, stderr := headroom(t, "run", sc, "--target", srv.URL, "--users", "2", "--duration", "1s", "--out", out, "--quiet")
	if code != ExitError || !strings.Contains(stderr, "init failed: the scenario's init: no admin token") {
		t.Errorf("exit %d, want %d and the init's error\n%s%s", code, ExitError, stdout, stderr)
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("%d requests sent after init failed", n)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s was created", out)
	}
}
