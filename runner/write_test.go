package runner

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// fillingDisk is a file system whose disk fills up under dir once the
// first checkpoint is in place: later writes there keep half their bytes
// and fail with ENOSPC, as on a real full disk.
type fillingDisk struct {
	result.OS
	dir  string
	full atomic.Bool
}

func (d *fillingDisk) WriteFile(name string, data []byte, perm fs.FileMode) error {
	if d.full.Load() && strings.HasPrefix(name, d.dir) {
		_ = os.WriteFile(name, data[:len(data)/2], perm)
		return &fs.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	return os.WriteFile(name, data, perm)
}

func (d *fillingDisk) Rename(oldpath, newpath string) error {
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	if newpath == filepath.Join(d.dir, result.HistogramsFile) {
		d.full.Store(true)
	}
	return nil
}

// A disk that fills up during a run: the run goes its length, the first
// checkpoint that fails is said at once (and in the notes), its result
// lands in a named fallback directory, and the output directory is left
// with neither temporary files nor the stale checkpoint.
func TestFullDiskResultGoesToAFallback(t *testing.T) {
	t.Parallel()
	target := httpbinServer(t)
	sc := load(t, "def a(user):\n    user.http.get('/get', name='get')\nactions = [action('A', a)]\nthink_time = think.constant('20ms')\n")
	base := t.TempDir()
	out, fallback := filepath.Join(base, "out"), filepath.Join(base, "tmp")
	disk := &fillingDisk{dir: out}
	var warned []string
	var warnedAt time.Time
	b := &Bounded{Common: Common{Scenario: sc, Target: target, Out: out, FS: disk, FallbackDir: fallback,
		Save: 300 * time.Millisecond, Grace: time.Second, Warn: func(msg string) {
			warned = append(warned, msg)
			warnedAt = time.Now()
		}}, Users: 2, Duration: 1500 * time.Millisecond}
	res, err := b.Run(context.Background())
	ended := time.Now()
	if len(warned) != 1 || !strings.Contains(warned[0], "checkpoint") || !strings.Contains(warned[0], out) || !warnedAt.Before(ended) {
		t.Errorf("warned %q at %v, the run ended at %v; want once, during the run", warned, warnedAt, ended)
	}
	if res != nil && !strings.Contains(strings.Join(res.Notes, "\n"), "a checkpoint of the result into "+out+" failed") {
		t.Errorf("the notes do not say a checkpoint failed: %q", res.Notes)
	}
	var we *WriteError
	if !errors.As(err, &we) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want a WriteError for ENOSPC", err)
	}
	if !disk.full.Load() {
		t.Fatal("no checkpoint was written before the disk filled: the test proves nothing")
	}
	if res == nil || res.Status != result.Completed || res.Totals.Count == 0 {
		t.Fatalf("the run's result was not returned: %+v", res)
	}
	if we.Fallback == "" || !strings.HasPrefix(filepath.Base(we.Fallback), "headroom-run-") || filepath.Dir(we.Fallback) != fallback {
		t.Fatalf("fallback %q, want %s/headroom-run-<time>; %v", we.Fallback, fallback, we.FallbackErr)
	}
	if !strings.Contains(err.Error(), we.Fallback) {
		t.Errorf("the message does not say where the result is: %v", err)
	}
	back, err := result.Read(we.Fallback)
	if err != nil || back.Status != result.Completed || back.Totals.Count != res.Totals.Count {
		t.Errorf("fallback result: %v, %+v", err, back)
	}
	if _, err := result.ReadHistograms(we.Fallback); err != nil {
		t.Errorf("fallback histograms: %v", err)
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		t.Errorf("%s left in the output directory (stale checkpoint or temporary file)", e.Name())
	}
}

// An output directory that cannot be created stops the run before any
// request is sent.
func TestUnwritableOutFailsBeforeTraffic(t *testing.T) {
	target := httpbinServer(t)
	sc := load(t, "def a(user):\n    user.http.get('/get', name='get')\nactions = [action('A', a)]\n")
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	var actions atomic.Int64
	_, err := (&Bounded{Common: Common{Scenario: sc, Target: target, Out: filepath.Join(file, "out"),
		OnAction: func(int, string) { actions.Add(1) }}, Users: 1, Duration: time.Second}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot write the result to") {
		t.Fatalf("err = %v", err)
	}
	if actions.Load() != 0 {
		t.Errorf("%d actions ran before the output was found unwritable", actions.Load())
	}
}
