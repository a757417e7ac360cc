package data

// A Dataset's rows as users hold them: the order a pick takes them in, the rows held under
// pick="unique", the share of them an agent's users take (Share). data.go reads the files.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"go.starlark.net/starlark"
)

// User is what ds.row(user) needs of the user it is given: the scenario's
// user value implements it. Its methods are called on the user's own
// goroutine.
type User interface {
	starlark.Value
	ID() int          // user.id, from 1
	Account() int     // user.account: the id of the first user that held its place
	Rand() *rand.Rand // user.rand's stream: a pick="random" row is drawn from it
	Holds() *Holds    // the rows the user holds
	InLane() bool     // a background lane's view of its user: it takes no rows of its own
}

// Holds are the rows one user holds: under PickUnique until Release, under
// PickRandom the one it drew. The zero value holds none. Used by the
// user's goroutine only.
type Holds struct{ picks []pick }

// Clone is a copy of h: a background lane reads the rows its user held
// when it started, and gives none back.
func (h *Holds) Clone() Holds { return Holds{slices.Clone(h.picks)} }

// Release gives the PickUnique rows back, for users that start later,
// and forgets every row held.
func (h *Holds) Release() {
	for _, p := range h.picks {
		if p.d.Pick == PickUnique {
			p.d.release(p.row)
		}
	}
	h.picks = nil
}

// Pick is how Dataset.row chooses a user's row.
type Pick string

const (
	PickCycle  Pick = "cycle"  // row (id-1) mod len
	PickID     Pick = "id"     // row id-1; an error for a user with no such row
	PickUnique Pick = "unique" // a row no other running user holds, until the user ends: row account-1 if free
	PickRandom Pick = "random" // drawn with user.rand at the first row(), kept
)

// Dataset is what data.csv returns: rows of strings keyed by the header.
// Its rows never change; the rows held under PickUnique are guarded by
// mu, so one Dataset is safe for every user at once.
type Dataset struct {
	Path string // as the scenario wrote it; "" for data.rows
	Line int32  // of the data.csv or data.rows call
	Pick Pick

	columns starlark.Tuple // the header, as strings
	rows    [][]string

	mu   sync.Mutex
	free []int32 // PickUnique: rows no user holds
	at   []int32 // PickUnique: row -> its index in free, or -1 when held
	// part, when set (ShareRows), is the block of rows this process may
	// hand out, lo..hi-1: agents share a dataset's rows so.
	part *[2]int
}

var (
	_ starlark.Indexable = (*Dataset)(nil)
	_ starlark.Iterable  = (*Dataset)(nil)
	_ starlark.HasAttrs  = (*Dataset)(nil)
)

// What names the dataset in messages: "data file users.csv", or
// "data.rows" for rows the scenario built.
func (d *Dataset) What() string {
	if d.Path == "" {
		return "data.rows"
	}
	return "data file " + d.Path
}

// Rows is the number of rows, the header not counted.
func (d *Dataset) Rows() int { return len(d.rows) }

func (d *Dataset) String() string {
	if d.Path == "" {
		return fmt.Sprintf("dataset(data.rows, %d rows, pick=%q)", len(d.rows), d.Pick)
	}
	return fmt.Sprintf("dataset(%q, %d rows, pick=%q)", d.Path, len(d.rows), d.Pick)
}
func (d *Dataset) Type() string          { return "dataset" }
func (d *Dataset) Freeze()               {} // immutable but for the holds, which mu guards
func (d *Dataset) Truth() starlark.Bool  { return len(d.rows) > 0 }
func (d *Dataset) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: dataset") }
func (d *Dataset) Len() int              { return len(d.rows) }
func (d *Dataset) Index(i int) starlark.Value {
	return d.row(i)
}
func (d *Dataset) Iterate() starlark.Iterator { return &datasetIter{d: d} }
func (d *Dataset) AttrNames() []string        { return []string{"columns", "row"} }
func (d *Dataset) Attr(name string) (starlark.Value, error) {
	switch name {
	case "columns":
		return d.columns, nil
	case "row":
		return starlark.NewBuiltin("dataset.row", d.rowOf).BindReceiver(d), nil
	}
	return nil, nil
}

// row makes row i as a frozen dict: built on each access, so that a file
// of a million rows costs its strings, not a million dicts.
func (d *Dataset) row(i int) *starlark.Dict {
	r := starlark.NewDict(len(d.columns))
	for j, k := range d.columns {
		_ = r.SetKey(k, starlark.String(d.rows[i][j]))
	}
	r.Freeze()
	return r
}

type datasetIter struct {
	d *Dataset
	i int
}

func (it *datasetIter) Next(p *starlark.Value) bool {
	if it.i >= len(it.d.rows) {
		return false
	}
	*p = it.d.row(it.i)
	it.i++
	return true
}
func (it *datasetIter) Done() {}

// pick is a row a user holds: under PickUnique until it ends, under
// PickRandom the one it drew.
type pick struct {
	d   *Dataset
	row int
}

// ds.row(user): the user's row, as d.Pick says.
func (d *Dataset) rowOf(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var arg starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &arg); err != nil {
		return nil, err
	}
	u, ok := arg.(User)
	if !ok {
		return nil, fmt.Errorf("%s: got a %s, want the user (ds.row(user))", b.Name(), arg.Type())
	}
	h := u.Holds()
	for _, p := range h.picks {
		if p.d == d {
			return d.row(p.row), nil
		}
	}
	if u.InLane() && (d.Pick == PickUnique || d.Pick == PickRandom) {
		return nil, fmt.Errorf(`%s: %s (pick=%q) in a background lane gives the row the user held when the lane started, and it held none: call ds.row(user) in setup before starting the lane`,
			b.Name(), d.What(), d.Pick)
	}
	n, id := len(d.rows), u.ID()
	switch d.Pick {
	case PickCycle:
		return d.row(((id-1)%n + n) % n), nil
	case PickID:
		if id < 1 || id > n {
			return nil, fmt.Errorf(`%s: %s (pick="id") has no row for user %d: it has %d rows, one per user id from 1; run at most %d users, or pick="cycle"`,
				b.Name(), d.What(), id, n, n)
		}
		return d.row(id - 1), nil
	case PickRandom:
		i := u.Rand().IntN(n)
		h.picks = append(h.picks, pick{d, i})
		return d.row(i), nil
	}
	// By account, not id: a user added in the place of one removed (a
	// ceiling stepping down and up) takes that one's row, the same
	// account, and the session it kept (user.session), not a row never
	// logged in.
	i, ok := d.take(((u.Account()-1)%n + n) % n)
	if !ok && d.part != nil {
		return nil, fmt.Errorf(`%s: all %d rows of %s (pick="unique") this agent holds (rows %d to %d: agents share the %d by their cores) are held by its running users, and each needs its own: give the dataset more rows, or run fewer users`,
			b.Name(), d.part[1]-d.part[0], d.What(), d.part[0]+1, d.part[1], n)
	}
	if !ok {
		return nil, fmt.Errorf(`%s: all %d rows of %s (pick="unique") are held by running users, and each needs its own: run at most %d users (a stopping user holds its row until it ends)`,
			b.Name(), n, d.What(), n)
	}
	h.picks = append(h.picks, pick{d, i})
	return d.row(i), nil
}

// take holds row want if it is free, else any free row; false when every
// row is held.
func (d *Dataset) take(want int) (int, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.free) == 0 {
		return 0, false
	}
	i := want
	if d.at[i] < 0 {
		i = int(d.free[len(d.free)-1])
	}
	k, last := d.at[i], d.free[len(d.free)-1]
	d.free[k], d.at[last] = last, k
	d.free, d.at[i] = d.free[:len(d.free)-1], -1
	return i, true
}

// release gives row i back.
func (d *Dataset) release(i int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at[i] = int32(len(d.free))
	d.free = append(d.free, int32(i))
}

// Share limits the rows d hands out under PickUnique to those from lo to
// hi-1, where part gives them for a dataset of n rows: a run's agents
// each hold a block of its rows, so no two users of the run hold the
// same. Call it before any user takes a row.
func (d *Dataset) Share(part func(n int) (lo, hi int)) {
	lo, hi := part(len(d.rows))
	lo, hi = max(lo, 0), min(hi, len(d.rows))
	d.mu.Lock()
	defer d.mu.Unlock()
	d.part = &[2]int{lo, max(lo, hi)}
	d.free = d.free[:0]
	for i := range d.at {
		d.at[i] = -1
	}
	for i := hi - 1; i >= lo; i-- { // popped from the end: row lo first
		d.at[i] = int32(len(d.free))
		d.free = append(d.free, int32(i))
	}
}

// Free is the number of rows no user holds under PickUnique.
func (d *Dataset) Free() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.free)
}
