//go:build linux

package main

import (
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/headroom-dev/headroom/"

// knowsNothingOf is docs/ARCHITECTURE.md's table, its last column, as
// imports a package's non-test files may not have (a prefix ending in /
// stands for every package under it). TestLayout holds the code to it,
// so the table cannot drift:
//
//	go test ./cmd/headroom -run TestLayout -v   # each package's imports of ours, and any rule broken
var knowsNothingOf = map[string][]string{
	"control":       {module, "go.starlark.net/"},
	"starjson":      {module},
	"scenario/data": {module + "scenario", module + "engine", module + "transport", module + "metrics"},
	"scenario/ws":   {module + "scenario", module + "engine", module + "transport"},
	"transport":     {module + "metrics", module + "scenario", module + "engine", "go.starlark.net/"},
	"metrics":       {module + "transport", module + "scenario", module + "engine", module + "metrics/wire", "go.starlark.net/"},
	"metrics/wire":  {module + "transport", module + "scenario", module + "engine", module + "agents", "go.starlark.net/"},
	"engine":        {module + "runner", module + "health", module + "control", module + "prom"},
	"prom":          {module + "health", module + "control", module + "runner", module + "engine"},
	"health":        {module + "engine", module + "control", module + "runner", module + "scenario"},
	"serverstats":   {module + "health", module + "engine", module + "runner"},
	"serverprof":    {module + "runner", module + "engine", module + "health"},
	"sampler":       {module + "runner", module + "compare", module + "engine"},
	"result":        {module + "runner", module + "engine", module + "scenario", module + "compare", module + "report", module + "analysis"},
	"analysis":      {module + "runner", module + "engine", module + "scenario", module + "compare", module + "report", module + "agents"},
	"compare":       {module + "runner", module + "engine", module + "report"},
	"report":        {module + "runner", module + "engine"},
	"agents":        {module + "runner"},
	"runner":        {module + "report", module + "live"},
	"har":           {module + "engine", module + "runner", module + "scenario"},
	"record":        {module + "engine", module + "runner", module + "scenario", module + "har"},
	"remotewrite":   {module + "runner", module + "health"},
	"live":          {module + "health", module + "engine"},

	"internal/wakeup": {module}, // a timerfd, for engine's dispatcher
}

// TestLayout: no package imports what the architecture says it knows
// nothing of; no package but cmd/headroom imports cli; the helpers under
// internal/testing/ are imported by tests alone.
func TestLayout(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}", "github.com/headroom-dev/headroom/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "|")
		name := strings.TrimPrefix(pkg, module)
		seen[name] = true
		var ours []string
		for _, imp := range strings.Split(imports, ",") {
			if strings.HasPrefix(imp, module) {
				ours = append(ours, strings.TrimPrefix(imp, module))
			}
			for _, no := range knowsNothingOf[name] {
				if imp == strings.TrimSuffix(no, "/") || strings.HasPrefix(imp, no) {
					t.Errorf("%s imports %s, which docs/ARCHITECTURE.md says it knows nothing of", name, imp)
				}
			}
			switch {
			case imp == module+"cli" && name != "cmd/headroom":
				t.Errorf("%s imports cli: only cmd/headroom does", name)
			case strings.HasPrefix(imp, module+"internal/testing/"):
				t.Errorf("%s imports %s outside its tests: internal/testing/ is for tests", name, imp)
			}
		}
		sort.Strings(ours)
		t.Logf("%-28s %s", name, strings.Join(ours, " "))
	}
	for name := range knowsNothingOf {
		if !seen[name] {
			t.Errorf("the table names %s, which go list does not know: keep docs/ARCHITECTURE.md and this test true", name)
		}
	}
	if !slices.Contains(sortedKeys(seen), "cli") {
		t.Error("go list listed no cli package: did the module path change?")
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
