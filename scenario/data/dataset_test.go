package data

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

// fakeUser is a User without a scenario: the interface is all a dataset
// reads of its users.
type fakeUser struct {
	id, account int
	lane        bool
	holds       Holds
}

var _ User = (*fakeUser)(nil)

func (u *fakeUser) String() string        { return "<fake user>" }
func (u *fakeUser) Type() string          { return "user" }
func (u *fakeUser) Freeze()               {}
func (u *fakeUser) Truth() starlark.Bool  { return true }
func (u *fakeUser) Hash() (uint32, error) { return uint32(u.id), nil }
func (u *fakeUser) ID() int               { return u.id }
func (u *fakeUser) Account() int          { return u.account }
func (u *fakeUser) Rand() *rand.Rand      { return rand.New(rand.NewPCG(uint64(u.id), 1)) }
func (u *fakeUser) Holds() *Holds         { return &u.holds }
func (u *fakeUser) InLane() bool          { return u.lane }

// loaded calls data.<fn>(args, **kw) on a thread the loader ld is
// attached to.
func loaded(t *testing.T, ld *Loader, fn string, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	t.Helper()
	th := &starlark.Thread{Name: "load"}
	Attach(th, ld)
	return starlark.Call(th, Module().Members[fn], args, kw)
}

// rowOf is ds.row(u)["n"].
func rowOf(t *testing.T, d *Dataset, u User) (string, error) {
	t.Helper()
	m, _ := d.Attr("row")
	v, err := starlark.Call(&starlark.Thread{}, m, starlark.Tuple{u}, nil)
	if err != nil {
		return "", err
	}
	n, _, _ := v.(*starlark.Dict).Get(starlark.String("n"))
	return string(n.(starlark.String)), nil
}

// A user holds its pick="unique" row until Release, which gives it to the
// next user; a lane's view of a user that held none is refused; Share
// keeps a process to its block of rows.
func TestHoldsAndShare(t *testing.T) {
	ld := NewLoader("/nowhere/s.star", 1<<10, map[string][]byte{"n.csv": []byte("n\n0\n1\n2\n3\n")})
	v, err := loaded(t, ld, "csv", starlark.Tuple{starlark.String("n.csv")}, []starlark.Tuple{{starlark.String("pick"), starlark.String("unique")}})
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*Dataset)
	if len(ld.Datasets()) != 1 || len(ld.Files()) != 1 || ld.Files()[0].Path != "n.csv" {
		t.Fatalf("loader kept %v and %+v", ld.Datasets(), ld.Files())
	}
	a, b := &fakeUser{id: 1, account: 1}, &fakeUser{id: 2, account: 1} // b prefers a's row
	ra, _ := rowOf(t, d, a)
	rb, _ := rowOf(t, d, b)
	if ra != "0" || rb == ra || d.Free() != 2 {
		t.Errorf("rows %s and %s, %d free: want 0, another, and 2 free", ra, rb, d.Free())
	}
	if again, _ := rowOf(t, d, a); again != ra {
		t.Errorf("user 1 asked again: row %s, want its own %s", again, ra)
	}
	lane := &fakeUser{id: 3, account: 3, lane: true}
	if _, err := rowOf(t, d, lane); err == nil || !strings.Contains(err.Error(), "in a background lane") {
		t.Errorf("a lane's user that held no row: %v", err)
	}
	lane.holds = a.holds.Clone()
	if r, _ := rowOf(t, d, lane); r != ra {
		t.Errorf("a lane of user 1 read row %s, want its user's %s", r, ra)
	}
	a.holds.Release()
	b.holds.Release()
	if d.Free() != 4 {
		t.Errorf("%d rows free after both released, want 4", d.Free())
	}
	d.Share(func(n int) (int, int) { return 2, n })
	c := &fakeUser{id: 1, account: 1}
	if r, _ := rowOf(t, d, c); r != "2" || d.Free() != 1 {
		t.Errorf("shared rows 2 and 3: user 1 got %s with %d free, want 2 with 1", r, d.Free())
	}
}

// data.* works only on the loading thread: a checks file's (a nil loader)
// has no data files, and any other thread is told to call it at load.
func TestDataNeedsItsLoader(t *testing.T) {
	args := starlark.Tuple{starlark.String("u.csv")}
	_, err := loaded(t, nil, "csv", args, nil)
	var he interface{ Hint() string }
	if err == nil || !strings.Contains(err.Error(), "a checks file has no data files") {
		t.Errorf("a checks file: %v", err)
	} else if !errors.As(err, &he) || he.Hint() != "move the data file to the scenario" {
		t.Errorf("a checks file: %v, want a hint", err)
	}
	_, err = starlark.Call(&starlark.Thread{}, Module().Members["json"], args, nil)
	if err == nil || !strings.Contains(err.Error(), "data.json reads its file once, at load: call it at the top level") {
		t.Errorf("a user's thread: %v", err)
	}
}
