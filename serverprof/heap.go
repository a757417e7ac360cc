package serverprof

import (
	"os"
	"time"

	"github.com/google/pprof/profile"
)

// Heap is a target's heap in use at the end of a phase: the last heap
// profile taken in it (one follows each CPU slice).
type Heap struct {
	At    time.Time // when it was asked for
	File  string    // relative to the result directory; "" when not written
	Inuse int64     // bytes in use, as of the server's last collection
	// Top are the functions that allocated most of what is in use, most
	// first.
	Top []HeapFunc
}

// HeapFunc is what one function allocated of the heap in use, in bytes.
type HeapFunc struct {
	Name  string
	Bytes int64
}

// heapAt is target's last heap profile taken in [from, to) (answered by
// to plus slack), nil when there is none.
func (c *Capture) heapAt(target int, from, to time.Time, top int) (*Heap, error) {
	var last *Slice
	for _, s := range c.Slices() {
		if s.Target == target && s.HeapErr == "" && (s.Heap != "" || s.heapRaw != nil) &&
			!s.End.Before(from) && !s.End.After(to.Add(slack)) {
			last = &s
		}
	}
	if last == nil {
		return nil, nil
	}
	var d decoded
	var err error
	if last.Heap == "" {
		d, err = decode(last.heapRaw)
	} else {
		root, rerr := os.OpenRoot(c.Dir)
		if rerr != nil {
			return nil, rerr
		}
		defer root.Close()
		d, err = readFile(root, last.Heap)
	}
	if err != nil {
		return nil, err
	}
	p := d.Profile
	h := &Heap{At: last.End, File: last.Heap}
	total, fs := tally(p, heapIndex(p))
	h.Inuse = total
	for _, f := range topBy(fs, top, func(f Func) time.Duration { return f.Flat }) {
		h.Top = append(h.Top, HeapFunc{Name: f.Name, Bytes: int64(f.Flat)})
	}
	return h, nil
}

// heapIndex is the index of p's in-use bytes (a Go heap profile's
// inuse_space), or -1.
func heapIndex(p *profile.Profile) int { return valueIndex(p, "inuse_space", "bytes") }
