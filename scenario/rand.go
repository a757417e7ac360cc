package scenario

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"go.starlark.net/starlark"
)

// randValue is user.rand: helpers over the user's own random stream, so a
// run with the same --seed makes the same draws.
type randValue struct {
	r     *rand.Rand
	bound [len(randMethods)]*starlark.Builtin // the methods made so far: user.rand.choice is made once per user, not per call
}

var randMethods = [...]string{"chance", "choice", "float", "int", "string"}

var _ starlark.HasAttrs = (*randValue)(nil)

func (v *randValue) String() string        { return "<user.rand>" }
func (v *randValue) Type() string          { return "rand" }
func (v *randValue) Freeze()               {}
func (v *randValue) Truth() starlark.Bool  { return true }
func (v *randValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: rand") }
func (v *randValue) AttrNames() []string {
	return append([]string(nil), randMethods[:]...)
}

const letters = "abcdefghijklmnopqrstuvwxyz0123456789"

func (v *randValue) Attr(name string) (starlark.Value, error) {
	slot := slices.Index(randMethods[:], name)
	if slot < 0 {
		return nil, nil
	}
	if b := v.bound[slot]; b != nil {
		return b, nil
	}
	fn := v.method(name)
	b := starlark.NewBuiltin("rand."+name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		return fn(b, args, kw)
	})
	v.bound[slot] = b
	return b, nil
}

// method is user.rand's method of that name (one of randMethods).
func (v *randValue) method(name string) func(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	switch name {
	case "int":
		return v.intIn
	case "float":
		return v.float
	case "chance":
		return v.chance
	case "choice":
		return v.choice
	default: // "string"
		return v.str
	}
}

// intIn is int(lo, hi): an int in [lo, hi], both included.
func (v *randValue) intIn(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var lo, hi int
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 2, &lo, &hi); err != nil {
		return nil, err
	}
	if hi < lo {
		return nil, fmt.Errorf("%s: hi %d < lo %d", b.Name(), hi, lo)
	}
	// In unsigned arithmetic hi-lo neither overflows nor, for the whole
	// int64 range, does span+1 reach IntN's 0 (which panics).
	span := uint64(hi) - uint64(lo)
	if span == math.MaxUint64 {
		return starlark.MakeInt(int(v.r.Uint64())), nil
	}
	return starlark.MakeInt(int(uint64(lo) + v.r.Uint64N(span+1))), nil
}

// float is float(): in [0, 1).
func (v *randValue) float(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 0); err != nil {
		return nil, err
	}
	return starlark.Float(v.r.Float64()), nil
}

// chance is chance(p): True with probability p in [0, 1].
func (v *randValue) chance(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var pv starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &pv); err != nil {
		return nil, err
	}
	p, ok := starlark.AsFloat(pv) // an int too: chance(1)
	if !ok {
		return nil, fmt.Errorf("%s: p is a %s, want a probability in [0, 1]", b.Name(), pv.Type())
	}
	if !(0 <= p && p <= 1) { // NaN included
		return nil, fmt.Errorf("%s: p is %v, want a probability in [0, 1]", b.Name(), pv)
	}
	return starlark.Bool(v.r.Float64() < p), nil
}

// choice is choice(seq): one element, uniformly.
func (v *randValue) choice(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	// Not UnpackPositionalArgs: into an interface it goes through reflection, a third of choice's time.
	seq, ok := starlark.Indexable(nil), false
	if len(args) == 1 && len(kw) == 0 {
		seq, ok = args[0].(starlark.Indexable)
	}
	if !ok {
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &seq); err != nil {
			return nil, err
		}
	}
	if seq.Len() == 0 {
		return nil, fmt.Errorf("%s: empty sequence", b.Name())
	}
	return seq.Index(v.r.IntN(seq.Len())), nil
}

// str is string(n): n random lowercase letters and digits.
func (v *randValue) str(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var n int
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &n); err != nil {
		return nil, err
	}
	if n < 0 || n > 1<<20 {
		return nil, fmt.Errorf("%s: length %d out of range [0, 1048576]", b.Name(), n)
	}
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = letters[v.r.IntN(len(letters))]
	}
	return starlark.String(buf), nil
}
