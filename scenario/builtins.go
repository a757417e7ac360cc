package scenario

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/scenario/data"
	"github.com/headroom-dev/headroom/scenario/ws"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// predeclared returns the names a scenario sees at top level besides
// Starlark's own. Built fresh per load: nothing here is shared state.
func predeclared() starlark.StringDict {
	return starlark.StringDict{
		"action":    starlark.NewBuiltin("action", builtinAction),
		"user_type": starlark.NewBuiltin("user_type", builtinUserType),
		"check":     starlark.NewBuiltin("check", builtinCheck),
		"fail":      starlark.NewBuiltin("fail", builtinFail),
		"json":      jsonModule,
		"sleep":     starlark.NewBuiltin("sleep", builtinSleep),
		"uuid":      starlark.NewBuiltin("uuid", builtinUUID),
		"url":       urlModule,
		"crypto":    cryptoModule,
		"base64":    base64Module,
		"clock":     clockModule,
		"data":      data.Module(),
		"delivery":  ws.DeliveryModule(receiverOf),
		"vars":      varsDict(nil), // the --var values; Load sets them
		"think": &starlarkstruct.Module{Name: "think", Members: starlark.StringDict{
			"constant":    starlark.NewBuiltin("think.constant", thinkConstant),
			"uniform":     starlark.NewBuiltin("think.uniform", thinkUniform),
			"exponential": starlark.NewBuiltin("think.exponential", thinkExponential),
			"reference":   starlark.NewBuiltin("think.reference", thinkReference),
		}},
	}
}

// actionValue is what action(...) returns.
type actionValue struct {
	Action
	pos syntax.Position
}

var _ starlark.Value = (*actionValue)(nil)

func (a *actionValue) String() string        { return fmt.Sprintf("action(%q, weight=%g)", a.Name, a.Weight) }
func (a *actionValue) Type() string          { return "action" }
func (a *actionValue) Freeze()               {}
func (a *actionValue) Truth() starlark.Bool  { return true }
func (a *actionValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: action") }

// action(name, fn, weight=1.0)
func builtinAction(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var name string
	var fn starlark.Value
	var weight starlark.Value = starlark.MakeInt(1)
	if err := starlark.UnpackArgs(b.Name(), args, kw, "name", &name, "fn", &fn, "weight?", &weight); err != nil {
		return nil, &argError{err.Error(), `write action("Name", function, weight=1.5)`}
	}
	if strings.TrimSpace(name) == "" {
		return nil, &argError{"action name is empty", `name it as it should appear in results, e.g. "CreatePost"`}
	}
	f, err := userFunc(fn)
	if err != nil {
		return nil, &argError{fmt.Sprintf("action %q: function %s", name, err), "define it as: def " + strings.ToLower(name) + "(user): ..."}
	}
	w, ok := starlark.AsFloat(weight)
	if !ok {
		return nil, &argError{fmt.Sprintf("action %q: weight is a %s, want a number", name, weight.Type()),
			"weights are relative frequencies, e.g. weight=6.5"}
	}
	if err := checkWeight(w); err != nil {
		return nil, err
	}
	v := &actionValue{Action: Action{Name: name, Fn: f, Weight: w}}
	if cs := th.CallStack(); len(cs) >= 2 {
		v.pos = cs[len(cs)-2].Pos
	}
	return v, nil
}

// Failure is raised by fail("why"): the action fails with that message.
type Failure struct{ Msg string }

func (f *Failure) Error() string { return f.Msg }

func builtinFail(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var msg string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &msg); err != nil {
		return nil, err
	}
	return nil, &Failure{Msg: msg}
}

// thinkValue is what think.*(...) returns.
type thinkValue struct {
	Think
	src string
}

func (t *thinkValue) String() string        { return t.src }
func (t *thinkValue) Type() string          { return "think" }
func (t *thinkValue) Freeze()               {}
func (t *thinkValue) Truth() starlark.Bool  { return true }
func (t *thinkValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: think") }

func newThink(t Think, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) *thinkValue {
	parts := make([]string, 0, len(args)+len(kw))
	for _, a := range args {
		parts = append(parts, a.String())
	}
	for _, p := range kw {
		parts = append(parts, fmt.Sprintf("%s=%s", p[0].(starlark.String).GoString(), p[1]))
	}
	return &thinkValue{Think: t, src: b.Name() + "(" + strings.Join(parts, ", ") + ")"}
}

// maxDuration is the longest time.Duration, about 292 years.
const maxDuration = time.Duration(math.MaxInt64)

// durationSyntax matches what time.ParseDuration reads: it tells a string
// that failed by overflow from one that is not a duration.
var durationSyntax = regexp.MustCompile(`^[-+]?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

// Duration converts a Starlark duration: a string such as "500ms" or "2s",
// or a number of seconds. It may be negative; callers say what they take.
// One whose size does not fit a time.Duration (about 292 years) is an
// error, not a wrapped-around value.
func Duration(v starlark.Value) (time.Duration, error) {
	tooLong := func(s string) error {
		return &argError{fmt.Sprintf("duration %s is too long: at most %v (about 292 years)", s, maxDuration.Truncate(time.Second)),
			`write durations like "250ms", "1.5s" or "2m", or a number of seconds`}
	}
	switch x := v.(type) {
	case starlark.String:
		d, err := time.ParseDuration(string(x))
		if err != nil {
			if durationSyntax.MatchString(string(x)) {
				return 0, tooLong(x.String())
			}
			return 0, &argError{fmt.Sprintf("bad duration %s", x), `write durations like "250ms", "1.5s" or "2m", or a number of seconds`}
		}
		return d, nil
	case starlark.Int, starlark.Float:
		f, _ := starlark.AsFloat(x) // ±Inf for an int too large for a float
		if math.IsNaN(f) {
			return 0, &argError{fmt.Sprintf("bad duration %v", f), "use a finite number of seconds"}
		}
		// float64(maxDuration) rounds up to 2^63, which does not fit: hence >=.
		if ns := f * float64(time.Second); ns >= float64(maxDuration) || ns <= -float64(maxDuration) {
			return 0, tooLong(fmt.Sprintf("%v s", x))
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	return 0, &argError{fmt.Sprintf("duration is a %s, want a string or a number of seconds", v.Type()), `e.g. "500ms" or 0.5`}
}

func durations(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple, names ...string) ([]time.Duration, error) {
	vals := make([]starlark.Value, len(names))
	pairs := make([]any, 0, 2*len(names))
	for i, n := range names {
		pairs = append(pairs, n, &vals[i])
	}
	if err := starlark.UnpackArgs(b.Name(), args, kw, pairs...); err != nil {
		return nil, &argError{err.Error(), "see docs/SCENARIOS.md for think time"}
	}
	out := make([]time.Duration, len(names))
	for i, v := range vals {
		if v == nil {
			continue
		}
		d, err := Duration(v)
		if err != nil {
			return nil, err
		}
		if d < 0 {
			return nil, &argError{fmt.Sprintf("%s: %s is negative", b.Name(), strings.TrimSuffix(names[i], "?")), "think times are zero or more"}
		}
		out[i] = d
	}
	return out, nil
}

func thinkConstant(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	d, err := durations(b, args, kw, "duration")
	if err != nil {
		return nil, err
	}
	return newThink(Constant(d[0]), b, args, kw), nil
}

func thinkUniform(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	d, err := durations(b, args, kw, "min", "max")
	if err != nil {
		return nil, err
	}
	if err := validRange(d[0], d[1], b.Name()); err != nil {
		return nil, err
	}
	return newThink(Uniform{Min: d[0], Max: d[1]}, b, args, kw), nil
}

func thinkExponential(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	d, err := durations(b, args, kw, "mean", "max?")
	if err != nil {
		return nil, err
	}
	if d[1] == 0 {
		d[1] = maxDuration
		if d[0] < maxDuration/10 {
			d[1] = 10 * d[0]
		}
	}
	if d[0] <= 0 {
		return nil, &argError{"think.exponential: mean must be positive", `e.g. think.exponential("2s")`}
	}
	return newThink(Exponential{MeanD: d[0], Max: d[1]}, b, args, kw), nil
}

// think.reference(min, avg, rates=[(rate, share), ...])
func thinkReference(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var minV, avgV starlark.Value
	var rates *starlark.List
	if err := starlark.UnpackArgs(b.Name(), args, kw, "min", &minV, "avg", &avgV, "rates?", &rates); err != nil {
		return nil, &argError{err.Error(), `e.g. think.reference(min="1s", avg="5s", rates=[(5.4, 1.0)])`}
	}
	lo, err := Duration(minV)
	if err != nil {
		return nil, err
	}
	avg, err := Duration(avgV)
	if err != nil {
		return nil, err
	}
	if err := validRange(lo, avg, b.Name()+" (min, avg)"); err != nil {
		return nil, err
	}
	if avg > maxDuration/2 { // pauses reach 2·avg − min
		return nil, &argError{fmt.Sprintf("%s: avg %v is too long: at most %v", b.Name(), avg, (maxDuration / 2).Truncate(time.Second)),
			`e.g. think.reference(min="1s", avg="5s")`}
	}
	t := Reference{Min: lo, Avg: avg, Rates: []Rate{{1, 1}}}
	if rates != nil {
		t.Rates = nil
		for i := range rates.Len() {
			tup, ok := rates.Index(i).(starlark.Tuple)
			if !ok || len(tup) != 2 {
				return nil, &argError{fmt.Sprintf("rates[%d] is not a (rate, share) pair", i), "e.g. rates=[(5.4, 0.5), (2.0, 0.5)]"}
			}
			r, ok1 := starlark.AsFloat(tup[0])
			s, ok2 := starlark.AsFloat(tup[1])
			if !ok1 || !ok2 || !(r > 0) || !(s > 0) || math.IsInf(r, 0) || math.IsInf(s, 0) {
				return nil, &argError{fmt.Sprintf("rates[%d] = %s: rate and share must be positive numbers", i, tup), "e.g. rates=[(5.4, 1.0)]"}
			}
			t.Rates = append(t.Rates, Rate{Rate: r, Share: s})
		}
		if len(t.Rates) == 0 {
			return nil, &argError{"rates is empty", "give at least one (rate, share) pair, or leave rates out for a factor of 1"}
		}
	}
	return newThink(t, b, args, kw), nil
}

// CheckSpec is a health check as a scenario wrote it. The ceiling command
// validates its query (PromQL) and reports mistakes at Path:Line.
type CheckSpec struct {
	Name      string
	Query     string
	Threshold float64
	Below     bool // fires when the value is below Threshold, instead of above
	Path      string
	Line      int32
}

type checkValue struct{ CheckSpec }

func (c *checkValue) String() string        { return fmt.Sprintf("check(%q)", c.Name) }
func (c *checkValue) Type() string          { return "check" }
func (c *checkValue) Freeze()               {}
func (c *checkValue) Truth() starlark.Bool  { return true }
func (c *checkValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: check") }

// check(name, query, threshold, below=False)
func builtinCheck(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var name, query string
	var threshold starlark.Value
	var below bool
	if err := starlark.UnpackArgs(b.Name(), args, kw, "name", &name, "query", &query, "threshold", &threshold, "below?", &below); err != nil {
		return nil, &argError{err.Error(), `write check("p99 latency (s)", "histogram_quantile(0.99, ...)", threshold=2)`}
	}
	t, ok := starlark.AsFloat(threshold)
	if !ok {
		return nil, &argError{fmt.Sprintf("check %q: threshold is a %s, want a number", name, threshold.Type()),
			"thresholds are numbers in the query's unit, e.g. threshold=0.1 for 100 ms when the query is in seconds"}
	}
	if math.IsNaN(t) || math.IsInf(t, 0) {
		return nil, &argError{fmt.Sprintf("check %q: threshold %v is not a finite number", name, t), "use a finite number"}
	}
	if strings.TrimSpace(name) == "" || strings.TrimSpace(query) == "" {
		return nil, &argError{"check needs a name and a query", `e.g. check("error rate (%)", "...", threshold=1)`}
	}
	c := &checkValue{CheckSpec{Name: name, Query: query, Threshold: t, Below: below}}
	if cs := th.CallStack(); len(cs) >= 2 {
		c.Path, c.Line = cs[len(cs)-2].Pos.Filename(), cs[len(cs)-2].Pos.Line
	}
	return c, nil
}
