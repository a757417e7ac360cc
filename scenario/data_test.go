package scenario

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
	"go.starlark.net/starlark"
)

// scenarioIn writes files into a temporary directory and loads the
// scenario src from there, with one action A that runs act(user).
func scenarioIn(t *testing.T, files map[string]string, src string, lim Limits) (*Scenario, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src += "\nactions = [action('A', act)]\n"
	path := filepath.Join(dir, "s.star")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadFile(context.Background(), path, lim)
}

// act runs action A for a new user of id and returns the user's state
// key "out" and the action's sample.
func act(t *testing.T, sc *Scenario, id int) (*User, starlark.Value, metrics.Sample) {
	t.Helper()
	rec := &samples{}
	u := NewUser(sc, Env{ID: id, Seed: 7, HTTP: &fakeDoer{status: 200}, Record: rec})
	u.Run(sc.Actions[0])
	v, _, _ := u.value.state.Get(starlark.String("out"))
	return u, v, (*rec)[len(*rec)-1]
}

const usersCSV = "name,password\nann,a1\nbob,b2\ncy,\"c,3\"\n"

func TestCSVRowsAndPicks(t *testing.T) {
	sc, err := scenarioIn(t, map[string]string{"users.csv": usersCSV}, `
cyc = data.csv("users.csv")
ids = data.csv("users.csv", pick="id")
rnd = data.csv("users.csv", pick="random")
N = len(cyc)
ALL = [r["name"] for r in cyc]
LAST = cyc[-1]["password"]
COLS = cyc.columns
def act(user):
    user.state["out"] = (cyc.row(user)["name"], ids.row(user)["name"], rnd.row(user)["name"], rnd.row(user)["name"],
                         N, ALL, LAST, COLS, user.rand.choice(cyc)["name"] in ALL)
`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id        int
		cyc, byID string
	}{{1, "ann", "ann"}, {2, "bob", "bob"}, {3, "cy", "cy"}, {4, "ann", ""}, {8, "bob", ""}} {
		_, out, s := act(t, sc, c.id)
		if c.byID == "" { // pick="id" has no row for this user: the action fails, saying so
			want := fmt.Sprintf(`s.star:10: dataset.row: data file users.csv (pick="id") has no row for user %d: it has 3 rows`, c.id)
			if s.Outcome != metrics.Failed || !strings.HasPrefix(s.Message, want) {
				t.Errorf("user %d: %v %q, want a failure %q", c.id, s.Outcome, s.Message, want)
			}
			continue
		}
		if s.Outcome != metrics.OK {
			t.Fatalf("user %d: %v %s", c.id, s.Outcome, s.Message)
		}
		tup := out.(starlark.Tuple)
		if got := string(tup[0].(starlark.String)); got != c.cyc {
			t.Errorf("user %d: cycle gave %s, want %s", c.id, got, c.cyc)
		}
		if got := string(tup[1].(starlark.String)); got != c.byID {
			t.Errorf("user %d: id gave %s, want %s", c.id, got, c.byID)
		}
		if tup[2] != tup[3] {
			t.Errorf("user %d: random gave %s, then %s: a user keeps its row", c.id, tup[2], tup[3])
		}
		want := `(3, ["ann", "bob", "cy"], "c,3", ("name", "password"), True)`
		if got := starlark.Tuple(tup[4:]).String(); got != want {
			t.Errorf("len, iteration, index, columns: %s, want %s", got, want)
		}
	}
	// Random picks follow the seed: the same user draws the same row.
	_, a, _ := act(t, sc, 2)
	_, b, _ := act(t, sc, 2)
	if a.(starlark.Tuple)[2] != b.(starlark.Tuple)[2] {
		t.Errorf("user 2 drew %s, then %s with the same seed", a.(starlark.Tuple)[2], b.(starlark.Tuple)[2])
	}
}

func TestDataIsReadOnly(t *testing.T) {
	sc, err := scenarioIn(t, map[string]string{"users.csv": usersCSV, "rooms.json": `{"rooms": ["!a:x", "!b:x"]}`}, `
users = data.csv("users.csv")
rooms = data.json("rooms.json")
def act(user):
    w = user.state["what"]
    if w == "row":
        users.row(user)["name"] = "eve"
    elif w == "index":
        users[0]["x"] = 1
    else:
        rooms["rooms"].append("!c:x")
`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"row", "index", "json"} {
		u := NewUser(sc, Env{ID: 1, HTTP: &fakeDoer{}, Record: &samples{}})
		_ = u.value.state.SetKey(starlark.String("what"), starlark.String(w))
		rec := &samples{}
		u.env.Record = rec
		if out := u.Run(sc.Actions[0]); out != metrics.Failed || !strings.Contains((*rec)[0].Message, "frozen") {
			t.Errorf("writing to a %s: %v %+v, want a failure for a frozen value", w, out, *rec)
		}
	}
}

func TestDataFileMistakesAreLoadErrors(t *testing.T) {
	big := "a\n" + strings.Repeat("x\n", 600)
	cases := []struct {
		name  string
		files map[string]string
		call  string
		want  string
	}{
		{"missing", nil, `data.csv("nope.csv")`, "data.csv: cannot read nope.csv: no such file or directory"},
		{"a directory", nil, `data.json(".")`, "data.json: . is not a regular file"},
		{"a device", nil, `data.csv("/dev/zero")`, "data.csv: /dev/zero is not a regular file"},
		{"ragged", map[string]string{"u.csv": "a,b,c\n1,2,3\n\n4,5\n"}, `data.csv("u.csv")`, "data.csv: u.csv:4: the row has 2 fields, the header 3"},
		{"quote", map[string]string{"u.csv": "a,b\n1,\"2\n"}, `data.csv("u.csv")`, "data.csv: u.csv:2:"},
		{"empty", map[string]string{"u.csv": ""}, `data.csv("u.csv")`, "u.csv is empty: its first line must name the columns"},
		{"no rows", map[string]string{"u.csv": "a,b\n"}, `data.csv("u.csv")`, "u.csv has a header and no rows"},
		{"unnamed", map[string]string{"u.csv": "a,,c\n1,2,3\n"}, `data.csv("u.csv")`, "u.csv:1: column 2 of the header has no name"},
		{"twice", map[string]string{"u.csv": "a,b,a\n1,2,3\n"}, `data.csv("u.csv")`, `u.csv:1: columns 1 and 3 are both named "a"`},
		{"pick", map[string]string{"u.csv": "a\n1\n"}, `data.csv("u.csv", pick="each")`, `data.csv: pick="each" is not a way to pick rows`},
		{"json", map[string]string{"r.json": "{\n  \"a\": [1,\n  2,,]\n}"}, `data.json("r.json")`, "data.json: r.json:3:5: unexpected character ','"},
		{"too big", map[string]string{"u.csv": big}, `data.csv("u.csv")`, "data.csv: u.csv takes the scenario's data files past 1 KiB together (the limit; 0 bytes read before it)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := scenarioIn(t, c.files, "\n\nX = "+c.call+"\ndef act(user):\n    pass\n", Limits{MaxData: 1024})
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error %v, want a LoadError", err)
			}
			if le.Line != 3 || !strings.Contains(le.Msg, c.want) {
				t.Errorf("at line %d: %s\nwant line 3 (the data.* call) and %q", le.Line, le.Msg, c.want)
			}
		})
	}
}

func TestDataFilesAreReadAtLoadOnly(t *testing.T) {
	sc, err := scenarioIn(t, map[string]string{"u.csv": usersCSV}, "def act(user):\n    data.csv('u.csv')\n", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, s := act(t, sc, 1)
	if s.Outcome != metrics.Failed || !strings.Contains(s.Message, "data.csv reads its file once, at load: call it at the top level") {
		t.Errorf("data.csv in an action: %v %q", s.Outcome, s.Message)
	}
}

func TestHashCoversDataFiles(t *testing.T) {
	src := "def act(user):\n    pass\n"
	plain, err := scenarioIn(t, nil, src, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	full := src + "\nactions = [action('A', act)]\n"
	sum := sha256.Sum256([]byte(full))
	if plain.Hash != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("without data files the hash is %s, want the source's alone", plain.Hash)
	}
	withData := "U = data.csv('u.csv')\n" + src
	a, err := scenarioIn(t, map[string]string{"u.csv": "a\n1\n"}, withData, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := scenarioIn(t, map[string]string{"u.csv": "a\n2\n"}, withData, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := scenarioIn(t, map[string]string{"u.csv": "a\n1\n"}, withData, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash == b.Hash || a.Hash != again.Hash {
		t.Errorf("hashes %s (a), %s (b), %s (a again): want the data's content to decide", a.Hash, b.Hash, again.Hash)
	}
}

// Under pick="unique" no two live users ever hold the same row, however
// their starts and ends interleave; a user past the rows is refused until
// one ends.
func TestUniqueRowsAreNeverHeldTwice(t *testing.T) {
	const rows, users, rounds = 8, 24, 40
	var csv strings.Builder
	csv.WriteString("n\n")
	for i := range rows {
		fmt.Fprintf(&csv, "%d\n", i)
	}
	sc, err := scenarioIn(t, map[string]string{"u.csv": csv.String()}, `
ds = data.csv("u.csv", pick="unique")
def act(user):
    user.state["out"] = ds.row(user)["n"]
    if ds.row(user)["n"] != user.state["out"]:
        fail("the row changed")
`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	holder := map[string]int{}
	held, refused := 0, 0
	var wg sync.WaitGroup
	for g := range users {
		wg.Go(func() {
			for r := range rounds {
				id := 1 + g + r*users
				u, out, s := act(t, sc, id)
				if s.Outcome != metrics.OK {
					if !strings.Contains(s.Message, `all 8 rows of data file u.csv (pick="unique") are held by running users`) {
						t.Errorf("user %d: %s", id, s.Message)
					}
					mu.Lock()
					refused++
					mu.Unlock()
					u.Close()
					continue
				}
				row := string(out.(starlark.String))
				mu.Lock()
				if other, ok := holder[row]; ok {
					t.Errorf("row %s held by users %d and %d at once", row, other, id)
				}
				holder[row] = id
				held++
				mu.Unlock()
				runtime.Gosched() // hold it a while, for others to try
				mu.Lock()
				delete(holder, row) // before Close: then another may take it
				mu.Unlock()
				u.Close()
			}
		})
	}
	wg.Wait()
	if held == 0 {
		t.Fatal("no user got a row")
	}
	if n := sc.Unique()[0].Free(); n != rows {
		t.Errorf("%d rows free after every user closed, want %d (held %d times, refused %d)", n, rows, held, refused)
	}

	// The ninth live user is refused, and gets a row once one user ends.
	var live []*User
	for id := 1; id <= rows; id++ {
		u, out, _ := act(t, sc, id)
		if out == nil || string(out.(starlark.String)) != fmt.Sprint(id-1) {
			t.Errorf("user %d got row %v, want %d: users 1..N take rows 0..N-1 when free", id, out, id-1)
		}
		live = append(live, u)
	}
	if _, _, s := act(t, sc, rows+1); s.Outcome != metrics.Failed {
		t.Errorf("user %d of %d rows: %v, want refused", rows+1, rows, s.Outcome)
	}
	live[3].Close()
	if u, out, s := act(t, sc, rows+2); s.Outcome != metrics.OK || string(out.(starlark.String)) != "3" {
		t.Errorf("after user 4 ended: %v %v, want row 3", s.Outcome, out)
	} else {
		u.Close()
	}
	if u := sc.Unique(); len(u) != 1 || u[0].Rows() != rows || u[0].Path != "u.csv" || u[0].Line != 2 {
		t.Errorf("Unique() = %v", u)
	}
}

func TestRowsBuiltAtLoad(t *testing.T) {
	sc, err := scenarioIn(t, nil, `
members = data.rows([{"username": "member-%d" % i, "n": i} for i in range(1, 4)], pick="unique")
def act(user):
    user.state["out"] = members.row(user)["username"] + "/" + members.row(user)["n"]
`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if u := sc.Unique(); len(u) != 1 || u[0].Rows() != 3 || u[0].What() != "data.rows" {
		t.Fatalf("unique datasets %v: want data.rows of 3 rows", u)
	}
	u2, out, _ := act(t, sc, 2)
	if out != starlark.String("member-2/2") {
		t.Errorf("user 2's row %v, want member-2/2 (values kept as their str())", out)
	}
	u5, out, _ := act(t, sc, 5) // row (5-1) mod 3 = 1 is held by user 2: another free row
	if out == starlark.String("member-2/2") || out == nil {
		t.Errorf("user 5 got %v while user 2 holds member-2", out)
	}
	u2.Close()
	u5.Close()

	for src, want := range map[string]string{
		`data.rows([])`:                       "data.rows: no rows",
		`data.rows([{"a": "1"}, "b"])`:        "row 1 is a string, want a dict",
		`data.rows([{"a": "1"}, {"b": "2"}])`: "row 1 has no key \"a\", which row 0 has",
		`data.rows([{"a": "1"}, {}])`:         "row 1 has 0 keys, row 0 has 1",
		`data.rows([{1: "1"}])`:               "row 0 has a key 1, want strings",
		`data.rows([{"a": "1"}], pick="all")`: `pick="all" is not a way to pick rows`,
	} {
		_, err := scenarioIn(t, nil, "x = "+src+"\ndef act(user):\n    pass\n", Limits{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}

// A scenario loaded elsewhere from the source and files another load read
// (an agent's, from its coordinator's) is the same scenario: the same hash
// and rows, with no disk. A file left out, or changed, is found.
func TestLoadFromTheFilesSent(t *testing.T) {
	src := `
users = data.csv("users.csv")
extra = data.json("extra.json")
def act(user):
    user.state["out"] = users[1]["name"] + extra["k"] + vars["x"]
`
	lim := Limits{Vars: map[string]string{"x": "!"}}
	sc, err := scenarioIn(t, map[string]string{"users.csv": "name\nada\nbob\n", "extra.json": `{"k": "?"}`}, src, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Files) != 2 || sc.Files[0].Path != "users.csv" || sc.Files[1].Path != "extra.json" {
		t.Fatalf("files read: %+v", sc.Files)
	}
	sent := map[string][]byte{}
	for _, f := range sc.Files {
		sent[f.Path] = f.Content
	}
	lim.Files = sent
	path := "/nowhere/s.star" // no disk to read from
	again, err := Load(context.Background(), path, sc.Source, lim)
	if err != nil {
		t.Fatal(err)
	}
	if again.Hash != sc.Hash {
		t.Errorf("hash %s, the original's %s", again.Hash, sc.Hash)
	}
	if _, out, _ := act(t, again, 1); out != starlark.String("bob?!") {
		t.Errorf("the user read %v, want bob?!", out)
	}

	delete(sent, "extra.json")
	if _, err := Load(context.Background(), path, sc.Source, lim); err == nil || !strings.Contains(err.Error(), "extra.json was not sent with the scenario") {
		t.Errorf("a file not sent: %v", err)
	}
	sent["extra.json"] = []byte(`{"k": "?", "more": 1}`)
	if changed, err := Load(context.Background(), path, sc.Source, lim); err != nil || changed.Hash == sc.Hash {
		t.Errorf("a changed file: %v; the hash must change", err)
	}
}

// TestShareRows: a process given a block of a pick="unique" dataset's
// rows (an agent's share) hands out those only, whatever the users' ids
// prefer, and says so when they are all held.
func TestShareRows(t *testing.T) {
	sc, err := scenarioIn(t, nil, `
ds = data.rows([{"n": str(i)} for i in range(10)], pick="unique")
def act(user):
    user.state["out"] = ds.row(user)["n"]
`, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sc.ShareRows(func(n int) (int, int) { return 3, 6 })
	got := map[string]bool{}
	for id := 1; id <= 3; id++ { // they prefer rows 0, 1, 2: not this block's
		_, out, s := act(t, sc, id)
		if s.Outcome != metrics.OK {
			t.Fatalf("user %d: %s", id, s.Message)
		}
		got[string(out.(starlark.String))] = true
	}
	if !got["3"] || !got["4"] || !got["5"] {
		t.Errorf("rows held %v, want 3, 4 and 5", got)
	}
	_, _, s := act(t, sc, 4)
	if s.Outcome == metrics.OK || !strings.Contains(s.Message, `all 3 rows of data.rows (pick="unique") this agent holds (rows 4 to 6: agents share the 10 by their cores)`) {
		t.Errorf("a fourth user: %v %q, want refused, saying which rows this agent holds", s.Outcome, s.Message)
	}
}
