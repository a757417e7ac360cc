// Package data is a scenario's `data` module: data files (data.csv,
// data.json) read once at load within a limit, rows the top level builds
// (data.rows), and the rows users hold (a Dataset: ds.row(user), under
// pick="unique" one row per running user). It knows nothing of the
// scenario's users but what User says of them.
package data

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/headroom-dev/headroom/starjson"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// Module is `data`: data.csv and data.json, files read once at load, and
// data.rows, a dataset of rows the top level builds. Each works on a
// thread a Loader was attached to (Attach) only. Built fresh each call.
func Module() *starlarkstruct.Module {
	return &starlarkstruct.Module{Name: "data", Members: starlark.StringDict{
		"csv":  starlark.NewBuiltin("data.csv", dataCSV),
		"json": starlark.NewBuiltin("data.json", dataJSON),
		"rows": starlark.NewBuiltin("data.rows", dataRows),
	}}
}

// loaderKey is the thread-local under which a loading thread holds its
// *Loader; no other thread has one, so data.* works at load only.
const loaderKey = "headroom.loader"

// Loader reads a scenario's data files while its top level runs, once
// each, within a limit together. Used by the loading thread only.
type Loader struct {
	dir      string // the scenario's directory: data paths are relative to it
	max      int64  // the limit of all files together, in bytes
	used     int64  // bytes read so far
	files    map[string][]byte
	order    []File // in the order first read
	datasets []*Dataset
	given    map[string][]byte // when not nil, the files there are, by path as written
}

// File is one data file a scenario read at load.
type File struct {
	Path    string // as the scenario gave it
	Content []byte
}

// NewLoader returns the loader of the scenario at scenarioPath (its data
// paths are relative to its directory), which reads at most max bytes
// of files together. given, when not nil, holds every file there is, by
// the path the scenario gives (an agent's, sent by its coordinator):
// then the disk is not read.
func NewLoader(scenarioPath string, max int64, given map[string][]byte) *Loader {
	return &Loader{dir: filepath.Dir(scenarioPath), max: max, files: map[string][]byte{}, given: given}
}

// Attach makes ld the loader of th, the thread that runs a scenario's
// top level; a nil ld marks th as a checks file's, which has no data
// files. On any other thread data.* says to call it at the top level.
func Attach(th *starlark.Thread, ld *Loader) { th.SetLocal(loaderKey, ld) }

// Files are the files read, in the order first read.
func (ld *Loader) Files() []File { return ld.order }

// Datasets are what data.csv and data.rows returned, in order.
func (ld *Loader) Datasets() []*Dataset { return ld.datasets }

// loaderOf returns the thread's loader, or an error for a data.* call
// made outside a scenario's top level.
func loaderOf(th *starlark.Thread, fn string) (*Loader, error) {
	ld, attached := th.Local(loaderKey).(*Loader)
	switch {
	case ld != nil:
		return ld, nil
	case !attached:
		return nil, fmt.Errorf("%s reads its file once, at load: call it at the top level (users = %s(\"users.csv\")) and use the result in functions", fn, fn)
	}
	return nil, &hintError{fn + " is for scenarios: a checks file has no data files", "move the data file to the scenario"}
}

// hintError is a mistake in a data.* call at load, with a hint for the
// user: a scenario's load error shows it (Hint).
type hintError struct {
	msg, hint string
}

func (e *hintError) Error() string { return e.msg }
func (e *hintError) Hint() string  { return e.hint }

// read returns the bytes of the file at path (relative to the scenario's
// directory), reading it the first time only.
func (ld *Loader) read(fn, path string) ([]byte, error) {
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(ld.dir, path)
	}
	full = filepath.Clean(full)
	if b, ok := ld.files[full]; ok {
		return b, nil
	}
	cannot := func(err error) error {
		return &hintError{fmt.Sprintf("%s: cannot read %s: %v", fn, path, unwrapPath(err)),
			fmt.Sprintf("data paths are relative to the scenario's directory: this one is %s", full)}
	}
	if ld.given != nil {
		b, ok := ld.given[path]
		if !ok {
			return nil, &hintError{fmt.Sprintf("%s: %s was not sent with the scenario", fn, path),
				"an agent reads the data files its coordinator read, by the same path: is the scenario the coordinator's?"}
		}
		if int64(len(b)) > ld.max-ld.used {
			return nil, &hintError{fmt.Sprintf("%s: %s takes the scenario's data files past %s together", fn, path, mib(ld.max)), "use a smaller file, or fewer"}
		}
		ld.used += int64(len(b))
		ld.files[full] = b
		ld.order = append(ld.order, File{Path: path, Content: b})
		return b, nil
	}
	// A device could be endless, and opening a pipe waits for a writer:
	// a data file is a regular file, checked before it is opened.
	st, err := os.Stat(full)
	if err != nil {
		return nil, cannot(err)
	}
	if !st.Mode().IsRegular() {
		return nil, &hintError{fmt.Sprintf("%s: %s is not a regular file", fn, path), "give the path of a file: " + full}
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, cannot(err)
	}
	defer f.Close()
	left := ld.max - ld.used
	tooBig := &hintError{fmt.Sprintf("%s: %s takes the scenario's data files past %s together (the limit; %s read before it)", fn, path, mib(ld.max), mib(ld.used)),
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
	ld.order = append(ld.order, File{Path: path, Content: b})
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
	v, err := starjson.Decode(string(content))
	if lim := (*starjson.LimitError)(nil); errors.As(err, &lim) {
		return nil, &hintError{fmt.Sprintf("%s: %s: %v", b.Name(), path, err), hint}
	} else if err != nil {
		return nil, &hintError{fmt.Sprintf("%s: %s", b.Name(), jsonErrorAt(path, content, err)), hint}
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
		return nil, &hintError{fmt.Sprintf("%s: delimiter=%q: want one character, not a quote or line break", b.Name(), delim), `e.g. delimiter=";" or delimiter="\t"`}
	}
	content, err := ld.read(b.Name(), path)
	if err != nil {
		return nil, err
	}
	d := &Dataset{Path: path, Line: callPos(th).Line, Pick: p}
	if err := d.parse(content, sep[0]); err != nil {
		return nil, &hintError{fmt.Sprintf("%s: %s", b.Name(), err),
			"the first line names the columns; every row has as many fields; a field holding the delimiter, a quote or a line break is quoted (\"a,b\")"}
	}
	ld.add(d)
	return d, nil
}

// loadingPick is the loader of a data.* call that makes a dataset, and
// the pick it asks for.
func loadingPick(th *starlark.Thread, fn, s string) (*Loader, Pick, error) {
	ld, err := loaderOf(th, fn)
	if err != nil {
		return nil, "", err
	}
	switch p := Pick(s); p {
	case PickCycle, PickID, PickUnique, PickRandom:
		return ld, p, nil
	}
	return nil, "", &hintError{fmt.Sprintf("%s: pick=%q is not a way to pick rows", fn, s),
		`pick="unique" (a row per running user), "cycle" (row (id-1) mod len), "id" (row id-1) or "random"`}
}

// add keeps d among the scenario's datasets, its free rows ready under
// PickUnique.
func (ld *Loader) add(d *Dataset) {
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
		return nil, &hintError{b.Name() + ": no rows", hint}
	}
	d := &Dataset{Line: callPos(th).Line, Pick: p}
	for i := range list.Len() {
		row, ok := list.Index(i).(*starlark.Dict)
		if !ok {
			return nil, &hintError{fmt.Sprintf("%s: row %d is a %s, want a dict", b.Name(), i, list.Index(i).Type()), hint}
		}
		if i == 0 {
			for _, k := range row.Keys() {
				ks, ok := k.(starlark.String)
				if !ok {
					return nil, &hintError{fmt.Sprintf("%s: row 0 has a key %s, want strings", b.Name(), k), hint}
				}
				d.columns = append(d.columns, ks)
			}
		}
		if row.Len() != len(d.columns) {
			return nil, &hintError{fmt.Sprintf("%s: row %d has %d keys, row 0 has %d", b.Name(), i, row.Len(), len(d.columns)), hint}
		}
		rec := make([]string, len(d.columns))
		for j, k := range d.columns {
			v, found, _ := row.Get(k)
			if !found {
				return nil, &hintError{fmt.Sprintf("%s: row %d has no key %s, which row 0 has", b.Name(), i, k), hint}
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
