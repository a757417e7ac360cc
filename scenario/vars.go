package scenario

import (
	"fmt"
	"hash"
	"regexp"
	"slices"
	"strings"

	"github.com/headroom-dev/headroom/internal/textdist"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// varName is what a --var name may be: a Starlark identifier.
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckVarName tells whether name can be a --var's name.
func CheckVarName(name string) error {
	if !varName.MatchString(name) {
		return fmt.Errorf("%q is not a name: use letters, digits and _ (not first a digit), e.g. members", name)
	}
	return nil
}

// varRead finds the names a scenario reads: vars.get("name" and vars["name".
var varRead = regexp.MustCompile(`vars(?:\.get\(|\[)\s*["']([A-Za-z_][A-Za-z0-9_]*)["']`)

// varsDict is the frozen dict vars: the --var values, names sorted.
func varsDict(vars map[string]string) *starlark.Dict {
	d := starlark.NewDict(len(vars))
	for _, k := range sortedKeys(vars) {
		_ = d.SetKey(starlark.String(k), starlark.String(vars[k]))
	}
	d.Freeze()
	return d
}

// checkVars refuses a --var the scenario's source never names (as a
// string, "name" or 'name'): a misspelled name would otherwise leave the
// default in force for the whole run, unnoticed.
func checkVars(path string, src []byte, vars map[string]string, fail failFunc) error {
	text := string(src)
	for _, k := range sortedKeys(vars) {
		if strings.Contains(text, `"`+k+`"`) || strings.Contains(text, `'`+k+`'`) {
			continue
		}
		hint := fmt.Sprintf(`read it as vars.get("%s", "default") (a string)`, k)
		var read []string
		for _, m := range varRead.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(read, m[1]) {
				read = append(read, m[1])
			}
		}
		best, bestD := "", 3
		for _, r := range read {
			if d := textdist.Levenshtein(k, r, bestD); d < bestD {
				best, bestD = r, d
			}
		}
		switch {
		case best != "":
			hint = fmt.Sprintf("did you mean --var %s=...? ", best) + hint
		case len(read) > 0:
			hint = "it reads " + strings.Join(read, ", ") + "; or " + hint
		default:
			hint = "it reads no vars; " + hint
		}
		return fail(syntax.Position{}, fmt.Sprintf("--var %s: the scenario never reads a var named %q", k, k), hint)
	}
	return nil
}

// hashVars adds the vars to a scenario's hash: the same file run with
// other values is another scenario.
func hashVars(h hash.Hash, vars map[string]string) {
	for _, k := range sortedKeys(vars) {
		fmt.Fprintf(h, "\x01%s\x00%d\x00%s", k, len(vars[k]), vars[k])
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
