package result

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// FS is the file system a result is written to: OS, or in tests one that
// fails as a full disk does. Paths are the operating system's.
type FS interface {
	MkdirAll(path string, perm fs.FileMode) error
	Mkdir(path string, perm fs.FileMode) error // fails with fs.ErrExist when path exists
	WriteFile(name string, data []byte, perm fs.FileMode) error
	Rename(oldpath, newpath string) error
	Remove(name string) error
	SyncDir(path string) error // makes the renames in directory path durable
}

// OS is the operating system's file system.
type OS struct{}

var _ FS = OS{}

func (OS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }
func (OS) Mkdir(path string, perm fs.FileMode) error    { return os.Mkdir(path, perm) }

// WriteFile writes data to name and syncs it to the disk.
func (OS) WriteFile(name string, data []byte, perm fs.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncDir syncs directory path, so the files renamed into it stay there
// after a crash.
func (OS) SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (OS) Remove(name string) error             { return os.Remove(name) }

// Writer writes result directories. The zero Writer writes to OS. Its
// methods are safe for concurrent use on different directories.
type Writer struct {
	FS FS // nil: OS
}

func (w Writer) fs() FS {
	if w.FS == nil {
		return OS{}
	}
	return w.FS
}

// Write writes r (and, if snap is not nil, its histograms) into dir,
// creating it. Each file is written to a temporary name, synced and
// renamed, so a crash leaves the previous checkpoint, never half a file; a
// write that fails (a full disk) removes its temporary file. histograms.json
// goes first and result.json last, both naming this write (Written): a
// reader never takes the histograms of one write with the result of
// another.
func (w Writer) Write(dir string, r *Result, snap *metrics.Snapshot) error {
	if err := w.fs().MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create result dir: %w", err)
	}
	r.Format, r.Written = Format, newWritten()
	if snap != nil {
		h := Histograms{Format: Format, Written: r.Written, Unit: "us", Window: "window", Requests: map[string]string{}, Actions: map[string]string{}}
		if err := encodeSnapshot(snap, h.Requests, h.Actions); err != nil {
			return err
		}
		var err error
		if h.Setup, err = encodeSetup(snap); err != nil {
			return err
		}
		return w.writePair(dir, &h, r)
	}
	return w.writeJSON(filepath.Join(dir, ResultFile), r)
}

// writePair writes histograms.json, then result.json; when result.json
// cannot be written, the histograms.json of this write goes too, so the
// directory holds no histograms of a result it does not have.
func (w Writer) writePair(dir string, h *Histograms, r *Result) error {
	hist := filepath.Join(dir, HistogramsFile)
	if err := w.writeJSON(hist, h); err != nil {
		return err
	}
	if err := w.writeJSON(filepath.Join(dir, ResultFile), r); err != nil {
		_ = w.fs().Remove(hist)
		return err
	}
	return nil
}

// newWritten is a name for one write of a result directory.
func newWritten() string {
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// WriteStep writes a step run's result into dir, as Write does, and adds
// to histograms.json the exact histograms of each level's held window
// under "levels", keyed by the level's user count ("48").
func (w Writer) WriteStep(dir string, r *Result, snap *metrics.Snapshot, levels map[int]*metrics.Snapshot) error {
	if err := w.fs().MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create result dir: %w", err)
	}
	r.Format, r.Written = Format, newWritten()
	h := Histograms{Format: Format, Written: r.Written, Unit: "us", Window: "window", Requests: map[string]string{}, Actions: map[string]string{}}
	if snap != nil {
		if err := encodeSnapshot(snap, h.Requests, h.Actions); err != nil {
			return err
		}
		var err error
		if h.Setup, err = encodeSetup(snap); err != nil {
			return err
		}
	}
	h.Levels = map[string]LevelHistograms{}
	for users, ls := range levels {
		lh, err := encodeSection(ls)
		if err != nil {
			return fmt.Errorf("level %d: %w", users, err)
		}
		h.Levels[strconv.Itoa(users)] = lh
	}
	return w.writePair(dir, &h, r)
}

// writeJSON writes v to path through a temporary file, which it removes
// when the write or the rename fails.
func (w Writer) writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	tmp := path + ".tmp"
	fsys := w.fs()
	if err := fsys.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("write %s: sync its directory: %w", path, err)
	}
	return nil
}

// probeFile is written and removed by Probe.
const probeFile = ".headroom-probe"

// Probe checks that dir can take a result before a run sends anything:
// it creates dir (and its parents), writes a small file there and removes
// it. It does not prove the disk has room for the whole result; Write
// still fails cleanly if it has not.
func (w Writer) Probe(dir string) error {
	fsys := w.fs()
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, probeFile)
	if err := fsys.WriteFile(p, []byte("headroom checks it can write here\n"), 0o644); err != nil {
		_ = fsys.Remove(p)
		return err
	}
	return fsys.Remove(p)
}

// Discard removes the result files from dir (result.json and
// histograms.json), so that a stale checkpoint does not pass for a
// run's answer when the answer went elsewhere. Files that are not there
// are not an error.
func (w Writer) Discard(dir string) error {
	var errs []error
	for _, f := range []string{ResultFile, HistogramsFile} {
		if err := w.fs().Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NewDir creates a new, empty directory under parent named prefix plus
// the time at (to the second), with -2, -3, ... added when that name is
// taken; creating it is what reserves the name, so two runs started in
// the same second never share a directory. It returns the path.
func (w Writer) NewDir(parent, prefix string, at time.Time) (string, error) {
	fsys := w.fs()
	if err := fsys.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	base := filepath.Join(parent, prefix+at.Format("20060102-150405"))
	for i := 1; i <= 1000; i++ {
		dir := base
		if i > 1 {
			dir = base + "-" + strconv.Itoa(i)
		}
		err := fsys.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("%s-2 to -1000 all exist: clean up %s", base, parent)
}

// ErrExists is the error of CheckOut for a directory that holds a result.
var ErrExists = errors.New("holds a result")

// ExistsError says which result a directory already holds.
type ExistsError struct {
	Dir       string
	Kind      string    // "run", "step", "ceiling"; "" when result.json cannot be read
	StartedAt time.Time // zero when unknown
	Status    string
	Why       string // why result.json could not be read, if it could not
}

func (e *ExistsError) Error() string {
	what := "a result that cannot be read (" + e.Why + ")"
	if e.Why == "" {
		what = fmt.Sprintf("a %s result from %s (status %s)", e.Kind, e.StartedAt.Local().Format("2006-01-02 15:04:05"), e.Status)
	}
	return fmt.Sprintf("%s already holds %s", e.Dir, what)
}

func (e *ExistsError) Unwrap() error { return ErrExists }

// CheckOut says whether a run may write its result into dir: yes when dir
// does not exist or is empty; an *ExistsError (errors.Is ErrExists) when
// it holds a result, unless overwrite; an error when it holds anything
// else. It reads only.
func CheckOut(dir string, overwrite bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, ResultFile)); err != nil {
		return fmt.Errorf("%s exists and is not a headroom result directory", dir)
	}
	if overwrite {
		return nil
	}
	e := &ExistsError{Dir: dir}
	if r, err := Read(dir); err != nil {
		e.Why = err.Error()
	} else {
		e.Kind, e.StartedAt, e.Status = r.Kind, r.StartedAt, r.Status
	}
	return e
}
