// Package scenario loads Starlark scenarios and runs what one user does:
// setup, weighted actions, think time, teardown. It knows nothing of
// scheduling; the engine decides when each user acts.
//
// A scenario is a Starlark file that defines:
//
//	def init(user): ...                       # optional, once per run before any user starts
//	def setup(user): ...                      # optional, once per user when it starts
//	def teardown(user): ...                   # optional, once per user when it stops
//	actions = [action("Name", fn, weight=6.5), ...]   # required, at least one
//	think_time = think.uniform("1s", "3s")    # optional, default think.constant("1s")
//
// or, for several types of users, each with its own of those:
//
//	user_types = [user_type("reader", weight=9, setup=login, actions=[...], think_time=...), ...]
//
// Loading runs the file once, checks everything it can before any traffic
// (syntax, undefined names, types, weights) and freezes the globals, so
// one Scenario is shared by every user.
package scenario

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/headroom-dev/headroom/internal/textdist"
	"github.com/headroom-dev/headroom/scenario/data"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Scenario is a loaded, validated scenario. Safe for concurrent use: its
// Starlark values are frozen.
type Scenario struct {
	Path string
	Hash string // "sha256:<hex>" of the source, its data files and --vars (see hashOf)
	// Source and Files are what was loaded: the source, and the data files
	// it read at load, in the order read, by the path it gave. A coordinator
	// sends them to its agents, which load them with Limits.Files.
	Source []byte
	Files  []DataFile
	Init   starlark.Callable // once per run, before any user: see (*User).Init; nil if none
	// Types are the kinds of users, in the order user_types lists them;
	// one, named DefaultType, when the scenario defines setup, actions and
	// think_time at top level. TypeOf gives a user's.
	Types []*UserType
	// Actions are every type's actions, each name once (the first type's
	// when two types share a name).
	Actions []*Action
	Checks  []CheckSpec // health checks, if the scenario defines checks = [...]; nil means the defaults
	Limits  Limits      // what its code may do, with the defaults filled in; NewUser applies MaxSteps
	mix     *typeMix

	datasets []*data.Dataset // what data.csv and data.rows returned, in order
}

// DataFile is one data file a scenario read at load: its path as the
// scenario gave it, and its content.
type DataFile = data.File

// Action is one weighted thing a user does.
type Action struct {
	Name   string
	Fn     starlark.Callable
	Weight float64 // > 0, relative to the other actions
}

// LoadError is a mistake in a scenario, found before any traffic. Its
// Error text names the file, line and column, quotes the line and gives a
// hint.
type LoadError struct {
	Path      string
	Line, Col int32
	Msg       string
	Hint      string
	Src       string // the offending line, if known
	Err       error  // the cause, when callers may branch on it: ErrTooManySteps, ErrLoadTimeout; else nil
}

func (e *LoadError) Unwrap() error { return e.Err }

func (e *LoadError) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "%s:%d:%d: %s", e.Path, e.Line, e.Col, e.Msg)
	} else {
		fmt.Fprintf(&b, "%s: %s", e.Path, e.Msg)
	}
	if e.Src != "" {
		fmt.Fprintf(&b, "\n  %4d | %s", e.Line, e.Src)
		if e.Col > 0 {
			fmt.Fprintf(&b, "\n       | %s^", strings.Repeat(" ", int(e.Col-1)))
		}
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, "\n  hint: %s", e.Hint)
	}
	return b.String()
}

// LoadFile reads and loads the scenario at path under lim (zero fields
// take the defaults). Cancelling ctx stops the file's top level.
func LoadFile(ctx context.Context, path string, lim Limits) (*Scenario, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return Load(ctx, path, src, lim)
}

// Load loads a scenario from source; path names it in messages. The
// file's top level runs once, under lim (zero fields take the defaults);
// cancelling ctx stops it, and Load then returns an error that wraps
// ctx's. The limits are kept in the Scenario for its users' calls.
func Load(ctx context.Context, path string, src []byte, lim Limits) (*Scenario, error) {
	lim = lim.withDefaults()
	sc := &Scenario{Path: path, Limits: lim}
	lines := strings.Split(string(src), "\n")
	fail := failer(path, lines)

	if err := checkVars(path, src, lim.Vars, fail); err != nil {
		return nil, err
	}
	ld := data.NewLoader(path, lim.MaxData, lim.Files)
	globals, err := execTop(ctx, path, src, lim, fail, ld)
	if err != nil {
		return nil, err
	}
	sc.Source, sc.Files, sc.datasets = src, ld.Files(), ld.Datasets()
	sc.Hash = hashOf(src, sc.Files, lim.Vars)
	if v, ok := globals["init"]; ok && v != starlark.None {
		if sc.Init, err = userFunc(v); err != nil {
			return nil, fail(globalPos(lines, "init"), "init "+err.Error(), "define it as: def init(user): ... (once per run, before any user; return what every user reads as user.shared)")
		}
	}

	if tv, ok := globals["user_types"]; ok && tv != starlark.None {
		sc.Types, err = typesOf(tv, globals, lines, fail)
	} else {
		var t *UserType
		t, err = implicitType(globals, lines, fail)
		sc.Types = []*UserType{t}
	}
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, t := range sc.Types {
		for _, a := range t.Actions {
			if !seen[a.Name] {
				seen[a.Name] = true
				sc.Actions = append(sc.Actions, a)
			}
		}
	}
	sc.mix = newTypeMix(sc.Types)

	if sc.Checks, err = checksOf(globals, lines, fail, "give at least one check(...), or remove checks to use the defaults"); err != nil {
		return nil, err
	}

	return sc, nil
}

// hashOf is "sha256:<hex>" of src followed, for each data file in the
// order first read, by NUL, its path as written, NUL, its size in
// decimal, NUL and its bytes, then for each --var (by name) SOH, its
// name, NUL, its value's length, NUL and its value: the source's hash
// alone when there are neither.
func hashOf(src []byte, files []DataFile, vars map[string]string) string {
	h := sha256.New()
	h.Write(src)
	for _, f := range files {
		fmt.Fprintf(h, "\x00%s\x00%d\x00", f.Path, len(f.Content))
		h.Write(f.Content)
	}
	hashVars(h, vars)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// implicitType is the one user type of a scenario without user_types:
// the top-level setup, teardown, actions and think_time.
func implicitType(globals starlark.StringDict, lines []string, fail failFunc) (*UserType, error) {
	t := &UserType{Name: DefaultType, Weight: 1}
	var errAt = func(name, msg, hint string) error {
		return fail(globalPos(lines, name), msg, hint)
	}
	for _, name := range []string{"setup", "teardown"} {
		v, ok := globals[name]
		if !ok || v == starlark.None {
			continue
		}
		fn, err := userFunc(v)
		if err != nil {
			return nil, errAt(name, fmt.Sprintf("%s %s", name, err), "define it as: def "+name+"(user): ...")
		}
		if name == "setup" {
			t.Setup = fn
		} else {
			t.Teardown = fn
		}
	}

	av, ok := globals["actions"]
	if !ok {
		return nil, fail(syntax.Position{}, "no actions: the scenario must define a list named actions",
			`add e.g. actions = [action("Browse", browse, weight=1)] where def browse(user): ...; or, for several types of users, user_types = [user_type("reader", actions=[...]), ...]`)
	}
	list, ok := av.(*starlark.List)
	if !ok {
		return nil, errAt("actions", fmt.Sprintf("actions is a %s, want a list of action(...)", av.Type()),
			`write actions = [action("Browse", browse, weight=1), ...]`)
	}
	if list.Len() == 0 {
		return nil, errAt("actions", "no actions: the actions list is empty",
			`add at least one: action("Browse", browse, weight=1)`)
	}
	seen := map[string]bool{}
	for i := range list.Len() {
		a, ok := list.Index(i).(*actionValue)
		if !ok {
			return nil, errAt("actions", fmt.Sprintf("actions[%d] is a %s, want action(...)", i, list.Index(i).Type()),
				`wrap each function: action("Name", fn, weight=1)`)
		}
		if seen[a.Name] {
			return nil, fail(a.pos, fmt.Sprintf("action %q is defined twice", a.Name), "give each action its own name")
		}
		seen[a.Name] = true
		t.Actions = append(t.Actions, &a.Action)
	}

	t.Think, t.ThinkSrc = defaultThink()
	if tv, ok := globals["think_time"]; ok && tv != starlark.None {
		th, ok := tv.(*thinkValue)
		if !ok {
			return nil, errAt("think_time", fmt.Sprintf("think_time is a %s, want think.constant/uniform/exponential/reference(...)", tv.Type()),
				`e.g. think_time = think.uniform("1s", "3s")`)
		}
		t.Think, t.ThinkSrc = th.Think, th.src
	}
	return t, nil
}

// userFunc checks that v can be called with one argument, the user.
func userFunc(v starlark.Value) (starlark.Callable, error) {
	fn, ok := v.(starlark.Callable)
	if !ok {
		return nil, fmt.Errorf("is a %s, want a function of one argument (the user)", v.Type())
	}
	if f, ok := v.(*starlark.Function); ok {
		n := f.NumParams()
		if f.HasVarargs() {
			n--
		}
		if f.HasKwargs() {
			n--
		}
		required := 0
		for i := range n {
			if f.ParamDefault(i) == nil {
				required++
			}
		}
		if n == 0 && !f.HasVarargs() {
			return nil, fmt.Errorf("takes no arguments, want one (the user)")
		}
		if required > 1 {
			return nil, fmt.Errorf("takes %d arguments, want one (the user)", required)
		}
	}
	return fn, nil
}

// failFunc makes a LoadError at a position of the file, quoting its line.
type failFunc = func(pos syntax.Position, msg, hint string) error

// execTop parses a file, checks it, and runs its top level under lim (with
// its defaults), returning the frozen globals. Every mistake is a
// LoadError; an interrupted load wraps ctx's error. ld reads the data
// files the top level asks for (data.csv, data.json); nil: a checks
// file's, which has none.
func execTop(ctx context.Context, path string, src []byte, lim Limits, fail failFunc, ld *data.Loader) (starlark.StringDict, error) {
	f, err := execOptions().Parse(path, src, 0)
	if err != nil {
		return nil, loadError(err, path, src, fail)
	}
	if n := tooDeep(f); n != nil {
		pos, _ := n.Span()
		return nil, fail(pos, fmt.Sprintf("expression nested too deep (more than %d levels)", maxNesting),
			"split it into parts: each operator of a chain such as 1 + 1 + ... nests one level, as does each call or index of a chain")
	}
	pre := predeclared()
	pre["vars"] = varsDict(lim.Vars)
	prog, err := starlark.FileProgram(f, pre.Has)
	if err != nil {
		return nil, loadError(err, path, src, fail)
	}
	th := &starlark.Thread{Name: "load " + path, Print: func(*starlark.Thread, string) {}}
	data.Attach(th, ld)
	globals, why, err := runTop(ctx, th, lim, func() (starlark.StringDict, error) {
		g, err := prog.Init(th, pre)
		g.Freeze()
		return g, err
	})
	if err == nil {
		return globals, nil
	}
	const once = "the top level runs once, at load: is there a loop there that never ends? "
	var stuck string
	if errors.Is(err, errStuck) {
		stuck = " (it was inside a builtin, which goes on until it returns)"
	}
	switch why {
	case haltInterrupt:
		return nil, fmt.Errorf("load scenario %s: interrupted%s: %w", path, stuck, context.Cause(ctx))
	case haltSteps:
		le := fail(evalPos(err, path), fmt.Sprintf("the top level ran more than %d Starlark steps", lim.MaxSteps),
			once+"If it is meant to do this much, raise the step limit (--max-steps; see Limits in docs/SCENARIOS.md)").(*LoadError)
		le.Err = ErrTooManySteps
		return nil, le
	case haltTimeout:
		le := fail(evalPos(err, path), fmt.Sprintf("the top level ran longer than %v%s", lim.LoadTimeout, stuck),
			once+"If it is meant to take this long, raise the load timeout (--load-timeout; see Limits in docs/SCENARIOS.md)").(*LoadError)
		le.Err = ErrLoadTimeout
		return nil, le
	}
	var ie *InternalError
	if errors.As(err, &ie) {
		return nil, fmt.Errorf("load scenario %s: %w", path, err)
	}
	return nil, loadError(err, path, src, fail)
}

// evalPos is the innermost position in path of a Starlark error's call
// stack, or the zero position.
func evalPos(err error, path string) syntax.Position {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		for i := len(ee.CallStack) - 1; i >= 0; i-- {
			if ee.CallStack[i].Pos.Filename() == path {
				return ee.CallStack[i].Pos
			}
		}
	}
	return syntax.Position{}
}

// loadError turns a Starlark error into a LoadError with a position and hint.
func loadError(err error, path string, src []byte, fail failFunc) error {
	var se syntax.Error
	if errors.As(err, &se) {
		pos := se.Pos
		if strings.Contains(se.Msg, "got newline") || strings.Contains(se.Msg, "got indent") {
			pos = endOfPreviousLine(src, pos) // the mistake is where the line ended
		}
		return fail(pos, "syntax error: "+se.Msg, "look for a missing ':', bracket, comma or quote")
	}
	var rl resolve.ErrorList
	if errors.As(err, &rl) {
		e := rl[0]
		hint := "builtins are action, think, fail, json, sleep, url, uuid, crypto, base64, clock, data, and user.http/user.rand/user.state/user.session/user.shared inside functions"
		if name, ok := strings.CutPrefix(e.Msg, "undefined: "); ok {
			if near := nearest(name); near != "" && !strings.Contains(e.Msg, "did you mean") {
				e.Msg += " (did you mean " + near + "?)"
			}
			hint = "only these names exist at top level: action, think, fail, json, sleep, url, uuid, crypto, base64, clock, data, plus Starlark's own (len, str, ...); " +
				"HTTP and random helpers are on the user: user.http.get(...), user.rand.int(...)"
		}
		return fail(e.Pos, e.Msg, hint)
	}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		hint := "the scenario's top level runs once at load; see docs/SCENARIOS.md"
		var he hinted
		if errors.As(ee.Unwrap(), &he) {
			hint = he.Hint()
		}
		return fail(evalPos(err, path), ee.Msg, hint)
	}
	return fmt.Errorf("load scenario %s: %w", path, err)
}

// globalPos finds where a global is assigned, for messages about it.
func globalPos(lines []string, name string) syntax.Position {
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(l, name) && (strings.HasPrefix(t, name+" ") || strings.HasPrefix(t, name+"=")) ||
			strings.HasPrefix(l, "def "+name+"(") {
			return syntax.MakePosition(nil, int32(i+1), 1)
		}
	}
	return syntax.Position{}
}

// hinted is an error from a top-level builtin with a hint for the user:
// an *argError, or a module's own (scenario/data's).
type hinted interface {
	error
	Hint() string
}

// argError is an error from a top-level builtin with a hint for the user.
type argError struct {
	msg, hint string
}

var _ hinted = (*argError)(nil)

func (e *argError) Error() string { return e.msg }
func (e *argError) Hint() string  { return e.hint }

func checkWeight(w float64) error {
	if math.IsNaN(w) || math.IsInf(w, 0) || w <= 0 {
		return &argError{fmt.Sprintf("action weight must be a positive number, got %v", w),
			"weights are relative frequencies, e.g. 6.5 and 1 make the first action 6.5 times as frequent"}
	}
	return nil
}

// endOfPreviousLine moves a position at the start of a line to the end of
// the last non-blank line before it.
func endOfPreviousLine(src []byte, pos syntax.Position) syntax.Position {
	lines := strings.Split(string(src), "\n")
	for l := int(pos.Line) - 1; l >= 1 && pos.Col <= 1; l-- {
		if t := strings.TrimRight(lines[l-1], " \t\r"); t != "" {
			return syntax.MakePosition(nil, int32(l), int32(len(t)+1))
		}
	}
	return pos
}

// nearest suggests the predeclared or universal name closest to an
// undefined one, if one is within two edits.
func nearest(name string) string {
	best, bestD := "", 3
	names := []string{}
	for k := range predeclared() {
		names = append(names, k)
	}
	for k := range starlark.Universe {
		names = append(names, k)
	}
	for _, k := range names {
		if d := textdist.Levenshtein(name, k, -1); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	return best
}

// checksOf reads the optional global checks = [check(...), ...].
// emptyHint is the hint when the list is empty.
func checksOf(globals starlark.StringDict, lines []string, fail failFunc, emptyHint string) ([]CheckSpec, error) {
	v, ok := globals["checks"]
	if !ok || v == starlark.None {
		return nil, nil
	}
	list, ok := v.(*starlark.List)
	if !ok {
		return nil, fail(globalPos(lines, "checks"), fmt.Sprintf("checks is a %s, want a list of check(...)", v.Type()),
			`write checks = [check("p99 latency (s)", "histogram_quantile(...)", threshold=2), ...]`)
	}
	if list.Len() == 0 {
		return nil, fail(globalPos(lines, "checks"), "checks is empty", emptyHint)
	}
	out := []CheckSpec{}
	seen := map[string]bool{}
	for i := range list.Len() {
		c, ok := list.Index(i).(*checkValue)
		if !ok {
			return nil, fail(globalPos(lines, "checks"), fmt.Sprintf("checks[%d] is a %s, want check(...)", i, list.Index(i).Type()),
				`each entry is check("name", "PromQL query", threshold=N)`)
		}
		if seen[c.Name] {
			return nil, fail(syntax.MakePosition(nil, c.Line, 1), fmt.Sprintf("check %q is defined twice", c.Name), "give each check its own name")
		}
		seen[c.Name] = true
		out = append(out, c.CheckSpec)
	}
	return out, nil
}

// failer returns a function that makes a LoadError at a position of path,
// quoting the line.
func failer(path string, lines []string) failFunc {
	return func(pos syntax.Position, msg, hint string) error {
		e := &LoadError{Path: path, Line: pos.Line, Col: pos.Col, Msg: msg, Hint: hint}
		if pos.Line > 0 && int(pos.Line) <= len(lines) {
			e.Src = strings.TrimRight(lines[pos.Line-1], "\r")
		}
		return e
	}
}

// execOptions are the Starlark dialect of scenarios: Python-like sets,
// while loops, top-level if/for, reassignable globals.
func execOptions() *syntax.FileOptions {
	return &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true}
}

// LoadChecksFile loads a Starlark file that defines only checks = [...],
// for --checks. The file sees the same builtins as a scenario and runs
// under the same limits as Load's.
func LoadChecksFile(ctx context.Context, path string, lim Limits) ([]CheckSpec, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read checks: %w", err)
	}
	lines := strings.Split(string(src), "\n")
	fail := failer(path, lines)
	globals, err := execTop(ctx, path, src, lim.withDefaults(), fail, nil)
	if err != nil {
		return nil, err
	}
	checks, err := checksOf(globals, lines, fail, "give at least one check(...), or leave out --checks to use the defaults")
	if err != nil {
		return nil, err
	}
	if checks == nil {
		return nil, fail(syntax.Position{}, "no checks: the file must define checks = [check(...), ...]", `e.g. checks = [check("p99 latency (s)", "...", threshold=2)]`)
	}
	return checks, nil
}
