package result

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/metrics"
)

// FullDisk is a file system whose disk fills up after Room more bytes:
// a write past it keeps what fitted and fails with ENOSPC, as a real full
// disk does. Only paths under Under are limited.
type FullDisk struct {
	OS
	Under string
	Room  int
}

func (d *FullDisk) WriteFile(name string, data []byte, perm fs.FileMode) error {
	if !strings.HasPrefix(name, d.Under) {
		return os.WriteFile(name, data, perm)
	}
	if len(data) <= d.Room {
		d.Room -= len(data)
		return os.WriteFile(name, data, perm)
	}
	_ = os.WriteFile(name, data[:d.Room], perm)
	d.Room = 0
	return &fs.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
}

func sample() (*Result, *metrics.Snapshot) {
	snap := metrics.NewSnapshot()
	for i := range 100 {
		snap.Add(&metrics.Sample{Kind: metrics.Request, Name: "GET /x", Latency: time.Duration(i) * time.Millisecond})
	}
	return &Result{Kind: "run", Status: Completed, Requests: snap.Summaries(metrics.Request, time.Second)}, snap
}

func TestWriteOnAFullDiskLeavesNoTemporaryFile(t *testing.T) {
	r, snap := sample()
	whole := filepath.Join(t.TempDir(), "whole")
	if err := Write(whole, r, snap); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(filepath.Join(whole, ResultFile))
	size := int(fi.Size())
	for _, room := range []int{0, size / 2, size + 10} { // nothing fits; half of result.json; result.json but not the histograms
		dir := filepath.Join(t.TempDir(), "r")
		w := Writer{FS: &FullDisk{Under: dir, Room: room}}
		err := w.Write(dir, r, snap)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("room %d: err = %v, want ENOSPC", room, err)
		}
		tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
		if len(tmps) > 0 {
			t.Errorf("room %d: temporary files left behind: %v", room, tmps)
		}
		if _, err := os.Stat(filepath.Join(dir, HistogramsFile)); !os.IsNotExist(err) {
			t.Errorf("room %d: a histograms.json was written on a full disk", room)
		}
	}
}

func TestProbeAndDiscard(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b")
	if err := (Writer{}).Probe(dir); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the probe left %v", entries)
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	if err := (Writer{}).Probe(filepath.Join(file, "out")); err == nil {
		t.Error("probe under a regular file succeeded")
	}
	if err := (Writer{FS: &FullDisk{Under: base, Room: 0}}).Probe(filepath.Join(base, "full")); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("probe on a full disk: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "full", probeFile)); !os.IsNotExist(err) {
		t.Error("a failed probe left its file")
	}

	r, snap := sample()
	if err := Write(dir, r, snap); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "report.md"), []byte("mine"), 0o644)
	if err := (Writer{}).Discard(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "report.md" {
		t.Errorf("after Discard: %v, want report.md only", entries)
	}
	if err := (Writer{}).Discard(dir); err != nil {
		t.Errorf("a second Discard: %v", err)
	}
}

func TestNewDirNeverReusesAName(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "runs")
	at := time.Date(2026, 11, 23, 6, 40, 1, 0, time.UTC)
	seen := map[string]bool{}
	for range 3 {
		dir, err := (Writer{}).NewDir(parent, "", at)
		if err != nil {
			t.Fatal(err)
		}
		if seen[dir] {
			t.Fatalf("%s handed out twice", dir)
		}
		seen[dir] = true
	}
	for _, want := range []string{"20261123-064001", "20261123-064001-2", "20261123-064001-3"} {
		if !seen[filepath.Join(parent, want)] {
			t.Errorf("no %s among %v", want, seen)
		}
	}
}

func TestCheckOut(t *testing.T) {
	base := t.TempDir()
	if err := CheckOut(filepath.Join(base, "new"), false); err != nil {
		t.Errorf("a new directory: %v", err)
	}
	if err := CheckOut(base, false); err != nil {
		t.Errorf("an empty directory: %v", err)
	}
	foreign := filepath.Join(base, "foreign")
	os.Mkdir(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644)
	for _, force := range []bool{false, true} {
		if err := CheckOut(foreign, force); err == nil || !strings.Contains(err.Error(), "is not a headroom result directory") {
			t.Errorf("a foreign directory, overwrite %v: %v", force, err)
		}
	}
	old := filepath.Join(base, "old")
	r, snap := sample()
	r.StartedAt = time.Date(2026, 11, 23, 6, 40, 1, 0, time.Local)
	Write(old, r, snap)
	err := CheckOut(old, false)
	var ee *ExistsError
	if !errors.Is(err, ErrExists) || !errors.As(err, &ee) || ee.Kind != "run" || !ee.StartedAt.Equal(r.StartedAt) {
		t.Fatalf("an older result: %v", err)
	}
	if !strings.Contains(err.Error(), "already holds a run result from 2026-11-23 06:40:01 (status completed)") {
		t.Errorf("message: %v", err)
	}
	if err := CheckOut(old, true); err != nil {
		t.Errorf("an older result, overwrite: %v", err)
	}
}

// histograms.json and result.json name the write that made them: the
// histograms of one write are never read as another's result's (a
// checkpoint of result.json alone after them, or a stop between the two).
func TestHistogramsOfAnotherWriteAreRefused(t *testing.T) {
	r, snap := sample()
	dir := filepath.Join(t.TempDir(), "r")
	if err := Write(dir, r, snap); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHistograms(dir); err != nil {
		t.Fatalf("the histograms of the same write: %v", err)
	}
	if err := Write(dir, r, nil); err != nil { // a later checkpoint, result.json alone
		t.Fatal(err)
	}
	if _, err := ReadHistograms(dir); err == nil || !strings.Contains(err.Error(), "of another write") {
		t.Errorf("histograms of an earlier write: %v, want refused", err)
	}
	back, err := Read(dir)
	if err != nil || back.Written == "" || back.Written != r.Written {
		t.Errorf("result.json: %v, written %q, want %q", err, back.Written, r.Written)
	}
}
