package result

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/headroom-dev/headroom/metrics"
)

// ErrNotResult means a directory holds no result.json.
var ErrNotResult = errors.New("not a headroom result directory")

// ErrCorrupt means a result file is there but cannot be used: it does not
// parse, is truncated, or holds figures no run can have (a negative count,
// more errors than requests, a histogram that does not decode). The error
// names the file and what is wrong.
var ErrCorrupt = errors.New("corrupt")

// MaxFileSize bounds the size of a result file Read and the histogram
// readers accept, in bytes: far above what a run writes (a day-long
// ceiling run's result.json is tens of megabytes), so a file past it is
// not a result, and reading it could exhaust memory.
const MaxFileSize = 1 << 30

// Read reads result.json from dir, rejecting other formats with a message
// that names the version found, and corrupt files with one that names the
// file and what is wrong (wrapping ErrCorrupt). A table of more than
// metrics.MaxNames names is folded as the writer would have (fold.go,
// FoldedNames).
func Read(dir string) (*Result, error) {
	b, err := readFile(dir, ResultFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (no %s)", dir, ErrNotResult, ResultFile)
	}
	if err != nil {
		return nil, err
	}
	r, err := decodeResult(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return r, nil
}

// decodeResult parses and checks the bytes of a result.json.
func decodeResult(b []byte) (*Result, error) {
	var probe struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, corrupt(ResultFile, jsonError(b, err))
	}
	if probe.Format != Format {
		if strings.HasPrefix(probe.Format, "headroom-result/") {
			return nil, fmt.Errorf("result format %q is not supported by this headroom (reads %q)", probe.Format, Format)
		}
		return nil, fmt.Errorf("%w (format %q)", ErrNotResult, probe.Format)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, corrupt(ResultFile, jsonError(b, err))
	}
	if err := r.validate(); err != nil {
		return nil, corrupt(ResultFile, err)
	}
	r.fold()
	return &r, nil
}

// ReadHistograms reads histograms.json from dir into a Snapshot whose
// Stats carry the exact histograms (counts of other figures come from
// result.json), folded as Read folds result.json's tables: exactly, the
// folded histograms merged under metrics.OtherName. A histogram that does
// not decode, or is not of headroom's range, is an error wrapping
// ErrCorrupt that names it; a missing file is an error wrapping
// os.ErrNotExist.
func ReadHistograms(dir string) (*metrics.Snapshot, error) {
	h, err := readHistogramsFile(dir)
	if err != nil {
		return nil, err
	}
	var d histDecoder
	snap := metrics.NewSnapshot()
	if err := d.decodeTable(h.Requests, snap.Requests); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, corrupt(HistogramsFile, err))
	}
	if err := d.decodeTable(h.Actions, snap.Actions); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, corrupt(HistogramsFile, err))
	}
	if h.Setup != nil {
		if snap.Setup, err = d.decodeSection(*h.Setup); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, corrupt(HistogramsFile, fmt.Errorf("setup: %w", err)))
		}
	}
	return snap, nil
}

// decodeSection decodes a section of histograms.json (a step level, the
// setups) into a Snapshot of its own.
func (d *histDecoder) decodeSection(lh LevelHistograms) (*metrics.Snapshot, error) {
	snap := metrics.NewSnapshot()
	if err := d.decodeTable(lh.Requests, snap.Requests); err != nil {
		return nil, err
	}
	if err := d.decodeTable(lh.Actions, snap.Actions); err != nil {
		return nil, err
	}
	return snap, nil
}

// ReadLevelHistograms reads the per-level histograms of a step run from
// dir's histograms.json, by user count. Each Snapshot's Stats carry the
// exact histogram and its count (other figures are in result.json), folded
// as ReadHistograms folds them. A result without levels (a bounded or
// ceiling run) gives an empty map. Which levels were held completely is
// in result.json (Step.Levels).
func ReadLevelHistograms(dir string) (map[int]*metrics.Snapshot, error) {
	h, err := readHistogramsFile(dir)
	if err != nil {
		return nil, err
	}
	var d histDecoder
	out := make(map[int]*metrics.Snapshot, len(h.Levels))
	for key, lh := range h.Levels {
		users, err := strconv.Atoi(key)
		if err != nil || users <= 0 {
			return nil, fmt.Errorf("%s: %w", dir, corrupt(HistogramsFile, fmt.Errorf("level %q is not a user count", key)))
		}
		snap, err := d.decodeSection(lh)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, corrupt(HistogramsFile, fmt.Errorf("level %d: %w", users, err)))
		}
		out[users] = snap
	}
	return out, nil
}

func readHistogramsFile(dir string) (*Histograms, error) {
	b, err := readFile(dir, HistogramsFile)
	if err != nil {
		return nil, err
	}
	h, err := decodeHistogramsFile(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if h.Written != "" {
		var r struct {
			Written string `json:"written"`
		}
		if b, err := readFile(dir, ResultFile); err == nil && json.Unmarshal(b, &r) == nil && r.Written != h.Written {
			return nil, fmt.Errorf("%s: %s is of another write than %s (a run that stopped between the two, or a later checkpoint): its histograms are not this result's", dir, HistogramsFile, ResultFile)
		}
	}
	return h, nil
}

func decodeHistogramsFile(b []byte) (*Histograms, error) {
	var h Histograms
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, corrupt(HistogramsFile, jsonError(b, err))
	}
	if h.Format != Format {
		return nil, fmt.Errorf("histogram format %q is not supported (reads %q)", h.Format, Format)
	}
	if h.Unit != "" && h.Unit != "us" {
		return nil, corrupt(HistogramsFile, fmt.Errorf("unit %q, want \"us\"", h.Unit))
	}
	return &h, nil
}

// readFile reads one file of a result directory, refusing one larger than
// MaxFileSize. A missing file is an error wrapping os.ErrNotExist.
func readFile(dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s: %w: a directory, not a file", path, ErrCorrupt)
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: %w: %d MiB, more than the %d MiB a result file can be", path, ErrCorrupt, st.Size()>>20, MaxFileSize>>20)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > MaxFileSize {
		return nil, fmt.Errorf("%s: %w: more than the %d MiB a result file can be", path, ErrCorrupt, MaxFileSize>>20)
	}
	return b, nil
}

// corrupt says why a file is unusable: "corrupt result.json: ...".
func corrupt(file string, why error) error {
	return fmt.Errorf("%w %s: %w", ErrCorrupt, file, why)
}

// jsonError says where a JSON document went wrong, by line and column.
func jsonError(b []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn) && syn.Offset >= int64(len(b)) && strings.Contains(syn.Error(), "unexpected end"):
		return fmt.Errorf("truncated after %d bytes (copied while it was written, or the disk was full?)", len(b))
	case errors.As(err, &syn):
		return fmt.Errorf("%s: %s", position(b, syn.Offset), syn.Error())
	case errors.As(err, &typ):
		return fmt.Errorf("%s: %s holds %s, want %s", position(b, typ.Offset), typ.Field, typ.Value, typ.Type)
	}
	return err
}

// position is "line L, column C" of a byte offset.
func position(b []byte, off int64) string {
	off = min(max(off, 0), int64(len(b)))
	before := b[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}
