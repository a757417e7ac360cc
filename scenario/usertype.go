package scenario

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// UserType is one kind of user of a scenario: what its users do. A
// scenario without user_types has one, named DefaultType.
type UserType struct {
	Name     string
	Weight   float64 // > 0, relative to the other types
	Setup    starlark.Callable
	Teardown starlark.Callable
	Actions  []*Action // at least one
	Think    Think
	ThinkSrc string // the think_time as written, for results
}

// DefaultType names the one user type of a scenario that defines setup,
// actions and think_time at top level.
const DefaultType = "default"

// maxTypes bounds the user types of a scenario: typeMix keeps one byte
// per user.
const maxTypes = 255

// defaultThink is the think time of a type that gives none.
func defaultThink() (Think, string) { return Constant(1e9), `think.constant("1s") (default)` }

// userTypeValue is what user_type(...) returns.
type userTypeValue struct {
	UserType
	pos syntax.Position
	// what the type was given, to tell a top-level setup, teardown or
	// think_time some type uses from one no type does
	given []starlark.Value
}

var _ starlark.Value = (*userTypeValue)(nil)

func (t *userTypeValue) String() string {
	return fmt.Sprintf("user_type(%q, weight=%g)", t.Name, t.Weight)
}
func (t *userTypeValue) Type() string          { return "user_type" }
func (t *userTypeValue) Freeze()               {}
func (t *userTypeValue) Truth() starlark.Bool  { return true }
func (t *userTypeValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: user_type") }

// user_type(name, weight=1, setup=None, actions=[...], think_time=None, teardown=None)
func builtinUserType(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var name string
	var weight starlark.Value = starlark.MakeInt(1)
	var setup, teardown, actions, think starlark.Value = starlark.None, starlark.None, starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kw, "name", &name, "weight?", &weight, "setup?", &setup,
		"actions?", &actions, "think_time?", &think, "teardown?", &teardown); err != nil {
		return nil, &argError{err.Error(), `write user_type("reader", weight=9, setup=login, actions=[action("Read", read)], think_time=think.constant("5s"))`}
	}
	if strings.TrimSpace(name) == "" {
		return nil, &argError{"user type name is empty", `name it as it should appear in results, e.g. "reader"`}
	}
	t := &userTypeValue{UserType: UserType{Name: name}, given: []starlark.Value{setup, teardown, think}}
	w, ok := starlark.AsFloat(weight)
	if !ok {
		return nil, &argError{fmt.Sprintf("user type %q: weight is a %s, want a number", name, weight.Type()),
			"type weights are relative shares of the users, e.g. weight=9 beside weight=1 makes 9 users in 10 of the first type"}
	}
	if math.IsNaN(w) || math.IsInf(w, 0) || w <= 0 {
		return nil, &argError{fmt.Sprintf("user type %q: weight must be a positive number, got %v", name, w),
			"type weights are relative shares of the users, e.g. weight=9 beside weight=1 makes 9 users in 10 of the first type"}
	}
	t.Weight = w
	for _, f := range []struct {
		arg  string
		v    starlark.Value
		into *starlark.Callable
	}{{"setup", setup, &t.Setup}, {"teardown", teardown, &t.Teardown}} {
		if f.v == starlark.None {
			continue
		}
		fn, err := userFunc(f.v)
		if err != nil {
			return nil, &argError{fmt.Sprintf("user type %q: %s= %s", name, f.arg, err), "give a function defined as: def " + f.arg + "(user): ..."}
		}
		*f.into = fn
	}
	var err error
	if t.Actions, err = typeActions(name, actions); err != nil {
		return nil, err
	}
	t.Think, t.ThinkSrc = defaultThink()
	if think != starlark.None {
		tv, ok := think.(*thinkValue)
		if !ok {
			return nil, &argError{fmt.Sprintf("user type %q: think_time= is a %s, want think.constant/uniform/exponential/reference(...)", name, think.Type()),
				`e.g. think_time=think.uniform("1s", "3s")`}
		}
		t.Think, t.ThinkSrc = tv.Think, tv.src
	}
	if cs := th.CallStack(); len(cs) >= 2 {
		t.pos = cs[len(cs)-2].Pos
	}
	return t, nil
}

// typeActions reads a type's actions=: a non-empty list of action(...),
// each name once.
func typeActions(typ string, v starlark.Value) ([]*Action, error) {
	example := fmt.Sprintf(`user_type(%q, actions=[action("Read", read, weight=3), action("Post", post)])`, typ)
	if v == starlark.None {
		return nil, &argError{fmt.Sprintf("user type %q has no actions", typ), "give it at least one: " + example}
	}
	seq, ok := v.(starlark.Indexable)
	if !ok || v.Type() == "string" {
		return nil, &argError{fmt.Sprintf("user type %q: actions= is a %s, want a list of action(...)", typ, v.Type()), example}
	}
	if seq.Len() == 0 {
		return nil, &argError{fmt.Sprintf("user type %q has no actions: its actions list is empty", typ), "give it at least one: " + example}
	}
	var out []*Action
	seen := map[string]bool{}
	for i := range seq.Len() {
		a, ok := seq.Index(i).(*actionValue)
		if !ok {
			return nil, &argError{fmt.Sprintf("user type %q: actions[%d] is a %s, want action(...)", typ, i, seq.Index(i).Type()),
				`wrap each function: action("Name", fn, weight=1)`}
		}
		if seen[a.Name] {
			return nil, &argError{fmt.Sprintf("user type %q: action %q is in its actions twice", typ, a.Name), "give each action of a type its own name"}
		}
		seen[a.Name] = true
		out = append(out, &a.Action)
	}
	return out, nil
}

// typesOf reads user_types = [user_type(...), ...], and refuses what it
// makes meaningless at top level: actions, and a setup, teardown or
// think_time no type uses.
func typesOf(v starlark.Value, globals starlark.StringDict, lines []string, fail failFunc) ([]*UserType, error) {
	at := globalPos(lines, "user_types")
	list, ok := v.(*starlark.List)
	if !ok {
		return nil, fail(at, fmt.Sprintf("user_types is a %s, want a list of user_type(...)", v.Type()),
			`write user_types = [user_type("reader", ...), user_type("poster", ...)]`)
	}
	if list.Len() == 0 {
		return nil, fail(at, "no user types: the user_types list is empty", `add at least one: user_type("reader", actions=[...])`)
	}
	if list.Len() > maxTypes {
		return nil, fail(at, fmt.Sprintf("%d user types: at most %d", list.Len(), maxTypes), "merge types that differ only in their data")
	}
	if _, ok := globals["actions"]; ok {
		return nil, fail(globalPos(lines, "actions"), "both user_types and a top-level actions: with user_types, each type has its own actions",
			`move the actions into the types (user_type("reader", actions=[...])), or rename the list if it is only shared by them (e.g. common = [...])`)
	}
	var out []*UserType
	given := map[starlark.Value]bool{}
	names := map[string]bool{}
	for i := range list.Len() {
		t, ok := list.Index(i).(*userTypeValue)
		if !ok {
			return nil, fail(at, fmt.Sprintf("user_types[%d] is a %s, want user_type(...)", i, list.Index(i).Type()),
				`each entry is user_type("name", weight=1, actions=[...])`)
		}
		if names[t.Name] {
			return nil, fail(t.pos, fmt.Sprintf("user type %q is defined twice", t.Name), "give each user type its own name")
		}
		names[t.Name] = true
		for _, g := range t.given {
			if g != starlark.None {
				given[g] = true
			}
		}
		out = append(out, &t.UserType)
	}
	for _, name := range []string{"setup", "teardown", "think_time"} {
		if g, ok := globals[name]; ok && g != starlark.None && !given[g] {
			return nil, fail(globalPos(lines, name), fmt.Sprintf("a top-level %s beside user_types, and no type uses it", name),
				fmt.Sprintf("with user_types, each type has its own: give it to the types that need it (user_type(..., %s=%s)), or remove it", name, name))
		}
	}
	return out, nil
}

// typeMix gives each user id its type: the type whose share of users
// 1..id is furthest behind its weight (smooth weighted round-robin, ties
// to the type listed first), so every prefix of ids holds the types in
// proportion. A type depends on the types of the ids before it: they are
// kept, one byte per id. Safe for concurrent use.
type typeMix struct {
	mu     sync.Mutex
	weight []float64 // relative to the largest, so that their sum is finite
	total  float64
	count  []int64 // users of each type among ids 1..len(of)
	of     []uint8 // of[id-1] is the index of user id's type
}

func newTypeMix(types []*UserType) *typeMix {
	m := &typeMix{weight: make([]float64, len(types)), count: make([]int64, len(types))}
	top := 0.0
	for _, t := range types {
		top = max(top, t.Weight)
	}
	for i, t := range types {
		m.weight[i] = t.Weight / top
		m.total += m.weight[i]
	}
	return m
}

// index returns the index of user id's type; id <= 0 (a user that runs
// no type's code, such as one running init) gets the first.
func (m *typeMix) index(id int) int {
	if id <= 0 || len(m.weight) == 1 {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for n := len(m.of) + 1; n <= id; n++ {
		best, behind := 0, math.Inf(-1)
		for i, w := range m.weight {
			// n·w/total − count, times total: how far type i is behind its share
			if b := float64(n)*w - m.total*float64(m.count[i]); b > behind {
				best, behind = i, b
			}
		}
		m.count[best]++
		m.of = append(m.of, uint8(best))
	}
	return int(m.of[id-1])
}

// TypeOf returns the type of user id (ids from 1; the same in every run).
func (sc *Scenario) TypeOf(id int) *UserType { return sc.Types[sc.mix.index(id)] }

// UsersByType counts users 1..n by type name.
func (sc *Scenario) UsersByType(n int) map[string]int {
	out := make(map[string]int, len(sc.Types))
	for _, t := range sc.Types {
		out[t.Name] = 0
	}
	if n <= 0 {
		return out
	}
	if len(sc.Types) == 1 {
		out[sc.Types[0].Name] = n
		return out
	}
	sc.mix.index(n)
	sc.mix.mu.Lock()
	defer sc.mix.mu.Unlock()
	for _, i := range sc.mix.of[:n] {
		out[sc.Types[i].Name]++
	}
	return out
}
