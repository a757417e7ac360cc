package scenario

import "github.com/headroom-dev/headroom/scenario/data"

// ShareRows limits the rows each pick="unique" dataset of sc hands out to
// those from lo to hi-1, where part gives them for a dataset of n rows: a
// run's agents each hold a block of its rows, so no two users of the run
// hold the same. Call it before any user runs.
func (sc *Scenario) ShareRows(part func(n int) (lo, hi int)) {
	for _, d := range sc.Unique() {
		d.Share(part)
	}
}

// Unique returns the datasets whose rows are held one per running user
// (pick="unique"), in the order the scenario made them: a run of more
// users than such a dataset has rows cannot set them all up.
func (sc *Scenario) Unique() []*data.Dataset {
	var out []*data.Dataset
	for _, d := range sc.datasets {
		if d.Pick == data.PickUnique {
			out = append(out, d)
		}
	}
	return out
}
