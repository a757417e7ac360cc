package result

// Profiles is what --profile took of the system under test's CPU: each
// slice (one CPU profile, in profiles/ beside result.json) and, by phase
// of the run, their merge and the functions that spent most.
type Profiles struct {
	Targets []string       `json:"targets"` // the pprof base URLs, in --profile's order
	SliceS  float64        `json:"slice_s"` // the length of one slice
	Slices  []ProfileSlice `json:"slices"`
	Phases  []ProfilePhase `json:"phases,omitempty"`
}

// ProfileSlice is one CPU profile of a target.
type ProfileSlice struct {
	Target int     `json:"target"` // in Profiles.Targets, from 0
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	File   string  `json:"file,omitempty"`  // relative to the result directory, gzipped pprof
	Error  string  `json:"error,omitempty"` // why there is none
	// Heap is the heap profile taken as the slice ended; HeapError why
	// there is none.
	Heap      string `json:"heap,omitempty"`
	HeapError string `json:"heap_error,omitempty"`
}

// ProfilePhase is one target's CPU over a phase of the run: "setup" (from
// the start to the measured window: the ramp and users' setups) or
// "window"; the merge of the slices that lie in it (one across its
// boundary is in neither: ProfiledS says how much of it they cover).
type ProfilePhase struct {
	Target int     `json:"target"`
	Phase  string  `json:"phase"`
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	Slices int     `json:"slices"`
	// LeftOut is how many slices that lay in the phase its merge left
	// out: with them it would have held more than one profile may.
	LeftOut int `json:"left_out,omitempty"`
	// ProfiledS is the time the slices cover; CPUSeconds the CPU sampled
	// in them; CPUCores their ratio.
	ProfiledS  float64 `json:"profiled_s"`
	CPUSeconds float64 `json:"cpu_s"`
	CPUCores   float64 `json:"cpu_cores"`
	// PerUnitMs is CPU a request (window) or a user set up (setup), in
	// milliseconds, over the profiled time; 0 when there was none.
	PerUnitMs float64   `json:"cpu_per_unit_ms,omitempty"`
	Unit      string    `json:"unit,omitempty"`   // "request" or "user set up"
	File      string    `json:"file,omitempty"`   // the merged profile, for go tool pprof
	Binary    string    `json:"binary,omitempty"` // the profiled program's file name
	Flat      []FuncCPU `json:"flat"`             // most CPU in the function itself
	Cum       []FuncCPU `json:"cum"`              // most CPU in it and what it called
	// Flame is where the CPU went, caller under callee, CPU seconds.
	Flame *Flame `json:"flame,omitempty"`
	// Heap is the server's heap in use at the phase's end (the last heap
	// profile taken in it); nil when it served none.
	Heap *ProfileHeap `json:"heap,omitempty"`
}

// ProfileHeap is a target's heap in use at a moment, as of its last
// garbage collection, and the functions that allocated most of it.
type ProfileHeap struct {
	AtS     float64   `json:"at_s"`
	File    string    `json:"file,omitempty"` // the heap profile, for go tool pprof
	InuseMB float64   `json:"inuse_mb"`
	Top     []FuncMem `json:"top"`
}

// FuncMem is what one function allocated of the heap in use.
type FuncMem struct {
	Name string  `json:"name"`
	MB   float64 `json:"mb"`
	Pc   float64 `json:"pct"`
}

// FuncCPU is one function's CPU in a phase, in seconds and in percent of
// the phase's.
type FuncCPU struct {
	Name   string  `json:"name"`
	FlatS  float64 `json:"flat_s"`
	CumS   float64 `json:"cum_s"`
	FlatPc float64 `json:"flat_pct"`
	CumPc  float64 `json:"cum_pct"`
}

// Flame is a flame graph's tree: the function Name, called from its
// parent's, and Value, the CPU in it and what it called. The root is
// "all". In a run's result Value is CPU seconds; in a comparison it is
// the new side's milliseconds a unit, and Base the base side's. Functions
// under a small share of the root's are left out (see FlameMin).
type Flame struct {
	Name     string   `json:"name"`
	Value    float64  `json:"value"`
	Base     float64  `json:"base,omitempty"`
	Children []*Flame `json:"children,omitempty"`
}

// FlameMin is the least share of the root's value a flame graph keeps a
// function for: under it a box is narrower than a pixel of a 1200-pixel
// graph, and the tree stays a few hundred functions, not thousands.
const FlameMin = 0.002
