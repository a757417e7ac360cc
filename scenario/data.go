package scenario

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// dataModule is data.csv and data.json, files read once at load, and
// data.rows, a dataset of rows the top level builds.
var dataModule = &starlarkstruct.Module{Name: "data", Members: starlark.StringDict{
	"csv":  starlark.NewBuiltin("data.csv", dataCSV),
	"json": starlark.NewBuiltin("data.json", dataJSON),
	"rows": starlark.NewBuiltin("data.rows", dataRows),
}}

// loaderKey is the thread-local under which a loading thread holds its
// *loader; no other thread has one, so data.* works at load only.
const loaderKey = "headroom.loader"

// loader reads a scenario's data files while its top level runs, once
// each, within Limits.MaxData together. Used by the loading thread only.
type loader struct {
	dir      string // the scenario's directory: data paths are relative to it
	max      int64  // Limits.MaxData
	used     int64  // bytes read so far
	files    map[string][]byte
	order    []dataFile // in the order first read, for the hash
	datasets []*Dataset
	given    map[string][]byte // Limits.Files: when not nil, the files there are, by path as written
}

// dataFile is one file a scenario read, for its hash.
type dataFile struct {
	path    string // as written
	content []byte
}

func newLoader(scenarioPath string, max int64, given map[string][]byte) *loader {
	return &loader{dir: filepath.Dir(scenarioPath), max: max, files: map[string][]byte{}, given: given}
}

// hash is "sha256:<hex>" of src followed, for each data file in the order
// first read, by NUL, its path as written, NUL, its size in decimal, NUL
// and its bytes, then for each --var (by name) SOH, its name, NUL, its
// value's length, NUL and its value: the source's hash alone when there
// are neither.
func (ld *loader) hash(src []byte, vars map[string]string) string {
	h := sha256.New()
	h.Write(src)
	if ld != nil {
		for _, f := range ld.order {
			fmt.Fprintf(h, "\x00%s\x00%d\x00", f.path, len(f.content))
			h.Write(f.content)
		}
	}
	hashVars(h, vars)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// loaderOf returns the thread's loader, or an error for a data.* call
// made outside a scenario's top level.
func loaderOf(th *starlark.Thread, fn string) (*loader, error) {
	if ld, ok := th.Local(loaderKey).(*loader); ok {
		return ld, nil
	}
	if userOf(th) != nil {
		return nil, fmt.Errorf("%s reads its file once, at load: call it at the top level (users = %s(\"users.csv\")) and use the result in functions", fn, fn)
	}
	return nil, &argError{fn + " is for scenarios: a checks file has no data files", "move the data file to the scenario"}
}

// read returns the bytes of the file at path (relative to the scenario's
// directory), reading it the first time only.
func (ld *loader) read(fn, path string) ([]byte, error) {
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(ld.dir, path)
	}
	full = filepath.Clean(full)
	if b, ok := ld.files[full]; ok {
		return b, nil
	}
	cannot := func(err error) error {
		return &argError{fmt.Sprintf("%s: cannot read %s: %v", fn, path, unwrapPath(err)),
			fmt.Sprintf("data paths are relative to the scenario's directory: this one is %s", full)}
	}
	if ld.given != nil {
		b, ok := ld.given[path]
		if !ok {
			return nil, &argError{fmt.Sprintf("%s: %s was not sent with the scenario", fn, path),
				"an agent reads the data files its coordinator read, by the same path: is the scenario the coordinator's?"}
		}
		if int64(len(b)) > ld.max-ld.used {
			return nil, &argError{fmt.Sprintf("%s: %s takes the scenario's data files past %s together", fn, path, mib(ld.max)), "use a smaller file, or fewer"}
		}
		ld.used += int64(len(b))
		ld.files[full] = b
		ld.order = append(ld.order, dataFile{path: path, content: b})
		return b, nil
	}
	// A device could be endless, and opening a pipe waits for a writer:
	// a data file is a regular file, checked before it is opened.
	st, err := os.Stat(full)
	if err != nil {
		return nil, cannot(err)
	}
	if !st.Mode().IsRegular() {
		return nil, &argError{fmt.Sprintf("%s: %s is not a regular file", fn, path), "give the path of a file: " + full}
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, cannot(err)
	}
	defer f.Close()
	left := ld.max - ld.used
	tooBig := &argError{fmt.Sprintf("%s: %s takes the scenario's data files past %s together (the limit; %s read before it)", fn, path, mib(ld.max), mib(ld.used)),
		"use a smaller file, or fewer: the data is read into memory once, before traffic (scenario.Limits.MaxData)"}
	if st.Size() > left {
		return nil, tooBig
	}
	b, err := io.ReadAll(io.LimitReader(f, left+1)) // +1: a file that grew past the limit meanwhile
	if err != nil {
		return nil, cannot(err)
	}
	if int64(len(b)) > left {
		return nil, tooBig
	}
	ld.used += int64(len(b))
	ld.files[full] = b
	ld.order = append(ld.order, dataFile{path: path, content: b})
	return b, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// mib writes a size in bytes, KiB or MiB.
func mib(n int64) string {
	unit, name := int64(1), "bytes"
	switch {
	case n >= 1<<20:
		unit, name = 1<<20, "MiB"
	case n >= 1<<10:
		unit, name = 1<<10, "KiB"
	}
	if n%unit == 0 {
		return fmt.Sprintf("%d %s", n/unit, name)
	}
	return fmt.Sprintf("%.1f %s", float64(n)/float64(unit), name)
}

// callPos is the position in the scenario of the call to a builtin.
func callPos(th *starlark.Thread) syntax.Position {
	if cs := th.CallStack(); len(cs) >= 2 {
		return cs[len(cs)-2].Pos
	}
	return syntax.Position{}
}

// data.json(path): the file's JSON as frozen Starlark values.
func dataJSON(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var path string
	if err := starlark.UnpackArgs(b.Name(), args, kw, "path", &path); err != nil {
		return nil, err
	}
	ld, err := loaderOf(th, b.Name())
	if err != nil {
		return nil, err
	}
	content, err := ld.read(b.Name(), path)
	if err != nil {
		return nil, err
	}
	const hint = "fix the file; it must hold one JSON value"
	v, err := decodeJSON(string(content))
	if lim := (*jsonLimit)(nil); errors.As(err, &lim) {
		return nil, &argError{fmt.Sprintf("%s: %s: %v", b.Name(), path, err), hint}
	} else if err != nil {
		return nil, &argError{fmt.Sprintf("%s: %s", b.Name(), jsonErrorAt(path, content, err)), hint}
	}
	v.Freeze()
	return v, nil
}

var jsonOffset = regexp.MustCompile(`^(?:json\.decode: )?at offset (\d+), `)

// jsonErrorAt rewrites json.decode's "at offset N, why" as "path:line:col: why".
func jsonErrorAt(path string, content []byte, err error) string {
	msg := err.Error()
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		msg = ee.Msg
	}
	m := jsonOffset.FindStringSubmatch(msg)
	if m == nil {
		return path + ": " + msg
	}
	off, _ := strconv.Atoi(m[1])
	off = min(off, len(content))
	line := 1 + bytes.Count(content[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(content[:off], '\n')
	return fmt.Sprintf("%s:%d:%d: %s", path, line, col, msg[len(m[0]):])
}

// Pick is how Dataset.row chooses a user's row.
type Pick string

const (
	PickCycle  Pick = "cycle"  // row (id-1) mod len
	PickID     Pick = "id"     // row id-1; an error for a user with no such row
	PickUnique Pick = "unique" // a row no other running user holds, until the user ends
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
	uv, ok := arg.(*userValue)
	if !ok {
		return nil, fmt.Errorf("%s: got a %s, want the user (ds.row(user))", b.Name(), arg.Type())
	}
	u := uv.http.u
	for _, p := range u.picks {
		if p.d == d {
			return d.row(p.row), nil
		}
	}
	if u.parent != nil && (d.Pick == PickUnique || d.Pick == PickRandom) {
		return nil, fmt.Errorf(`%s: %s (pick=%q) in a background lane gives the row the user held when the lane started, and it held none: call ds.row(user) in setup before starting the lane`,
			b.Name(), d.What(), d.Pick)
	}
	n := len(d.rows)
	switch d.Pick {
	case PickCycle:
		return d.row(((uv.id-1)%n + n) % n), nil
	case PickID:
		if uv.id < 1 || uv.id > n {
			return nil, fmt.Errorf(`%s: %s (pick="id") has no row for user %d: it has %d rows, one per user id from 1; run at most %d users, or pick="cycle"`,
				b.Name(), d.What(), uv.id, n, n)
		}
		return d.row(uv.id - 1), nil
	case PickRandom:
		i := uv.rand.r.IntN(n)
		u.picks = append(u.picks, pick{d, i})
		return d.row(i), nil
	}
	i, ok := d.take(((uv.id-1)%n + n) % n)
	if !ok && d.part != nil {
		return nil, fmt.Errorf(`%s: all %d rows of %s (pick="unique") this agent holds (rows %d to %d: agents share the %d by their cores) are held by its running users, and each needs its own: give the dataset more rows, or run fewer users`,
			b.Name(), d.part[1]-d.part[0], d.What(), d.part[0]+1, d.part[1], n)
	}
	if !ok {
		return nil, fmt.Errorf(`%s: all %d rows of %s (pick="unique") are held by running users, and each needs its own: run at most %d users (a stopping user holds its row until it ends)`,
			b.Name(), n, d.What(), n)
	}
	u.picks = append(u.picks, pick{d, i})
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

// Close stops the user's background lanes and waits for them (see
// StopLanes), closes its WebSockets (with a close frame) and gives back
// the dataset rows it holds (pick="unique"), for users that start later.
// Call it once the user's calls are over: the engine does when its
// goroutine ends. Later calls do nothing.
func (u *User) Close() {
	u.StopLanes("user ended")
	u.closeWebSockets()
	for _, p := range u.picks {
		if p.d.Pick == PickUnique {
			p.d.release(p.row)
		}
	}
	u.picks = nil
}

// ShareRows limits the rows each pick="unique" dataset of sc hands out to
// those from lo to hi-1, where part gives them for a dataset of n rows: a
// run's agents each hold a block of its rows, so no two users of the run
// hold the same. Call it before any user runs.
func (sc *Scenario) ShareRows(part func(n int) (lo, hi int)) {
	for _, d := range sc.Unique() {
		lo, hi := part(len(d.rows))
		lo, hi = max(lo, 0), min(hi, len(d.rows))
		d.mu.Lock()
		d.part = &[2]int{lo, max(lo, hi)}
		d.free = d.free[:0]
		for i := range d.at {
			d.at[i] = -1
		}
		for i := hi - 1; i >= lo; i-- { // popped from the end: row lo first
			d.at[i] = int32(len(d.free))
			d.free = append(d.free, int32(i))
		}
		d.mu.Unlock()
	}
}

// Unique returns the datasets whose rows are held one per running user
// (pick="unique"), in the order the scenario made them: a run of more
// users than such a dataset has rows cannot set them all up.
func (sc *Scenario) Unique() []*Dataset {
	var out []*Dataset
	for _, d := range sc.datasets {
		if d.Pick == PickUnique {
			out = append(out, d)
		}
	}
	return out
}

// data.csv(path, pick="cycle", delimiter=",")
func dataCSV(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var path string
	pickS, delim := string(PickCycle), ","
	if err := starlark.UnpackArgs(b.Name(), args, kw, "path", &path, "pick?", &pickS, "delimiter?", &delim); err != nil {
		return nil, err
	}
	ld, p, err := loadingPick(th, b.Name(), pickS)
	if err != nil {
		return nil, err
	}
	sep := []rune(delim)
	if len(sep) != 1 || sep[0] == '"' || sep[0] == '\r' || sep[0] == '\n' || sep[0] == 0xFFFD {
		return nil, &argError{fmt.Sprintf("%s: delimiter=%q: want one character, not a quote or line break", b.Name(), delim), `e.g. delimiter=";" or delimiter="\t"`}
	}
	content, err := ld.read(b.Name(), path)
	if err != nil {
		return nil, err
	}
	d := &Dataset{Path: path, Line: callPos(th).Line, Pick: p}
	if err := d.parse(content, sep[0]); err != nil {
		return nil, &argError{fmt.Sprintf("%s: %s", b.Name(), err),
			"the first line names the columns; every row has as many fields; a field holding the delimiter, a quote or a line break is quoted (\"a,b\")"}
	}
	ld.add(d)
	return d, nil
}

// loadingPick is the loader of a data.* call that makes a dataset, and
// the pick it asks for.
func loadingPick(th *starlark.Thread, fn, s string) (*loader, Pick, error) {
	ld, err := loaderOf(th, fn)
	if err != nil {
		return nil, "", err
	}
	switch p := Pick(s); p {
	case PickCycle, PickID, PickUnique, PickRandom:
		return ld, p, nil
	}
	return nil, "", &argError{fmt.Sprintf("%s: pick=%q is not a way to pick rows", fn, s),
		`pick="unique" (a row per running user), "cycle" (row (id-1) mod len), "id" (row id-1) or "random"`}
}

// add keeps d among the scenario's datasets, its free rows ready under
// PickUnique.
func (ld *loader) add(d *Dataset) {
	if d.Pick == PickUnique {
		d.free, d.at = make([]int32, len(d.rows)), make([]int32, len(d.rows))
		for i := range d.rows { // popped from the end: row 0 first
			d.free[i], d.at[len(d.rows)-1-i] = int32(len(d.rows)-1-i), int32(i)
		}
	}
	ld.datasets = append(ld.datasets, d)
}

// data.rows(rows, pick="cycle"): a dataset of rows the top level built, a
// list of dicts with the same string keys; values are kept as their str().
func dataRows(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var list *starlark.List
	pickS := string(PickCycle)
	if err := starlark.UnpackArgs(b.Name(), args, kw, "rows", &list, "pick?", &pickS); err != nil {
		return nil, err
	}
	ld, p, err := loadingPick(th, b.Name(), pickS)
	if err != nil {
		return nil, err
	}
	const hint = `give a list of dicts with the same keys, e.g. data.rows([{"username": "member-%d" % i} for i in range(1, 201)], pick="unique")`
	if list.Len() == 0 {
		return nil, &argError{b.Name() + ": no rows", hint}
	}
	d := &Dataset{Line: callPos(th).Line, Pick: p}
	for i := range list.Len() {
		row, ok := list.Index(i).(*starlark.Dict)
		if !ok {
			return nil, &argError{fmt.Sprintf("%s: row %d is a %s, want a dict", b.Name(), i, list.Index(i).Type()), hint}
		}
		if i == 0 {
			for _, k := range row.Keys() {
				ks, ok := k.(starlark.String)
				if !ok {
					return nil, &argError{fmt.Sprintf("%s: row 0 has a key %s, want strings", b.Name(), k), hint}
				}
				d.columns = append(d.columns, ks)
			}
		}
		if row.Len() != len(d.columns) {
			return nil, &argError{fmt.Sprintf("%s: row %d has %d keys, row 0 has %d", b.Name(), i, row.Len(), len(d.columns)), hint}
		}
		rec := make([]string, len(d.columns))
		for j, k := range d.columns {
			v, found, _ := row.Get(k)
			if !found {
				return nil, &argError{fmt.Sprintf("%s: row %d has no key %s, which row 0 has", b.Name(), i, k), hint}
			}
			if s, ok := v.(starlark.String); ok {
				rec[j] = string(s)
			} else {
				rec[j] = v.String()
			}
		}
		d.rows = append(d.rows, rec)
	}
	ld.add(d)
	return d, nil
}

// parse reads the header and rows of a CSV file; errors name path:line.
func (d *Dataset) parse(content []byte, sep rune) error {
	content = bytes.TrimPrefix(content, []byte("\xef\xbb\xbf")) // a byte order mark, as spreadsheets write
	r := csv.NewReader(bytes.NewReader(content))
	r.Comma, r.FieldsPerRecord = sep, -1
	header, err := r.Read()
	switch {
	case err == io.EOF:
		return fmt.Errorf("%s is empty: its first line must name the columns", d.Path)
	case err != nil:
		return csvError(d.Path, err)
	}
	seen := map[string]int{}
	for i, h := range header {
		if h == "" {
			return fmt.Errorf("%s:1: column %d of the header has no name", d.Path, i+1)
		}
		if j, ok := seen[h]; ok {
			return fmt.Errorf("%s:1: columns %d and %d are both named %q", d.Path, j+1, i+1, h)
		}
		seen[h] = i
		d.columns = append(d.columns, starlark.String(h))
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return csvError(d.Path, err)
		}
		if len(rec) != len(header) {
			line, _ := r.FieldPos(0)
			return fmt.Errorf("%s:%d: the row has %d fields, the header %d", d.Path, line, len(rec), len(header))
		}
		d.rows = append(d.rows, rec)
	}
	if len(d.rows) == 0 {
		return fmt.Errorf("%s has a header and no rows", d.Path)
	}
	return nil
}

func csvError(path string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d:%d: %v", path, pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("%s: %v", path, err)
}
