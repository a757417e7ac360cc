package wire

import (
	"encoding/binary"
	"slices"

	"github.com/headroom-dev/headroom/metrics"
)

// wakeName is the name Wakes.Late travels under on the wire.
const wakeName = "wake"

// maxSlots bounds the slots of one encoded snapshot: a second's
// starts fall in about a hundred, their intended times in a few more.
const maxSlots = 4 * metrics.MaxSlotAge

func (e *encoder) wakes(w *metrics.Wakes) {
	if w == nil || !w.Late.Counted() {
		e.b = append(e.b, 0)
		return
	}
	e.b = append(e.b, 1)
	e.stats(map[string]*metrics.Stat{wakeName: w.Late})
	keys := make([]int64, 0, len(w.Slots))
	for k := range w.Slots {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > maxSlots { // the newest: the second being sent
		keys = keys[len(keys)-maxSlots:]
	}
	e.uvarint(uint64(len(keys)))
	for i, k := range keys {
		if i == 0 {
			e.b = binary.AppendVarint(e.b, k)
		} else {
			e.uvarint(uint64(k - keys[i-1]))
		}
		c := w.Slots[k]
		e.uvarint(uint64(c[0]))
		e.uvarint(uint64(c[1]))
	}
}

// wakes reads the wakes of every decoder of m and merges them into into's,
// if into is not nil.
func (m *merger) wakes(into *metrics.Snapshot) {
	with := m.flagged("wakes")
	if len(with) == 0 {
		return
	}
	var w *metrics.Wakes
	if into != nil {
		if into.Wakes == nil {
			into.Wakes = metrics.NewWakes()
		}
		w = into.Wakes
	}
	m.byName(with, "wake names", func(name []byte, at []*decoder) {
		var st *metrics.Stat
		if w != nil {
			st = w.Late
		}
		for _, d := range at {
			if string(name) != wakeName {
				d.fail("wakes named %q, not %q", name, wakeName)
				return
			}
			d.stat(st, name, m.sum)
		}
		if st != nil && m.sum != nil {
			m.sum.recordInto(st.Hist())
		}
	})
	for _, d := range with {
		n := d.length(maxSlots, "slots")
		var k int64
		for i := range n {
			if i == 0 {
				k = d.varint()
			} else {
				gap := d.uvarint()
				if gap == 0 || gap > 1<<40 {
					d.fail("slot gap %d", gap)
				}
				k += int64(gap)
			}
			a, meant := d.count(), d.count()
			if d.err != nil {
				return
			}
			if w != nil {
				c := w.Slots[k]
				c[0], c[1] = addCount(c[0], a), addCount(c[1], meant)
				w.Slots[k] = c
			}
		}
	}
}
