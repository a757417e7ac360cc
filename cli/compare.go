package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/headroom-dev/headroom/compare"
	"github.com/headroom-dev/headroom/report"
)

// ExitRegression is compare's exit code when a change passes --fail-on.
const ExitRegression = 3

const compareHelp = `
Compares two sets of results of the same kind (run, step or ceiling): the
base build's runs, then --vs and the new build's runs. Each side may be
one run or several repeats; repeats are what let headroom tell a real
change from run-to-run noise (3 per side is a good start).

For each figure — supported users, requests/s, latency per request (mean,
p50, p95, p99 from the exact histograms), error rates, and the server's
CPU, memory and API/store times when the runs scraped them, and users'
setups (a login, a sign-up) over the whole runs, which every other figure
leaves out — it prints
both sides, the change with its 95% interval, and a verdict: regression,
improvement, or no significant change. With one run per side it says no
verdict is possible rather than guess. Requests made on one side only are
listed apart and left out of every aggregate; aggregates weigh both sides
with one mix (docs/COMPARE.md).

Writes report.md (+ PNG charts), report.html and compare.json into --out.

Examples:
  headroom compare runs/base-1 runs/base-2 runs/base-3 --vs runs/new-1 runs/new-2 runs/new-3 --out reports/v2-vs-v1
  headroom compare runs/base --vs runs/new --fail-on users:-5%,p99:+10%,errors:+1pp   # gate a CI pipeline

Exit codes: 0 compared (no gate failed), 1 could not read the results, 2 bad command line or results that cannot be compared,
3 a change passed --fail-on, 5 an internal error (a bug in headroom).
`

// splitVs splits compare's arguments at --vs: the base side's and the
// new side's (nil without --vs).
func splitVs(args []string) (baseArgs, newArgs []string) {
	for i, a := range args {
		if a == "--vs" || a == "-vs" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

func compareCmd(_ context.Context, env Env, args []string) int {
	var out, failOn, labels string
	var o compare.Options
	minEffect := percent(0.03)
	fs := newFlags(env, "compare", "BASE_DIR... --vs NEW_DIR... [--out DIR] [--fail-on GATES]", compareHelp)
	fs.StringVar(&out, "out", "", "directory for report.md, report.html and compare.json (default: print only)")
	fs.StringVar(&failOn, "fail-on", "", "exit 3 when a change is real and beyond a limit: users:-5%,rps:-5%,mean:+10%,p50:+10%,p95:+10%,p99:+10%,errors:+1pp,server:+10%,setup:+20%")
	numberVar(fs, &o.Confidence, "confidence", 0.95, 0.5, 0.9999, true, "a probability in (0.5, 1), e.g. 0.95", "confidence of the intervals")
	fs.Var(&minEffect, "min-effect", "smallest relative change given a verdict, however certain")
	fs.StringVar(&labels, "labels", "base,new", "names of the two sides in the report")
	basePos, newPos, code, ok := compareSides(env, fs, args)
	if !ok {
		return code
	}
	gates, err := parseGates(failOn)
	if err != nil {
		return fail(env, ExitUsage, "%v", err)
	}
	o.MinEffect = float64(minEffect)
	bl, nl, _ := strings.Cut(labels, ",")
	if bl == "" || nl == "" {
		return fail(env, ExitUsage, "--labels %q: want two names, e.g. v1.4,v1.5", labels)
	}
	base, err := compare.Load(bl, basePos)
	if err != nil {
		return fail(env, ExitError, "%v", err)
	}
	nw, err := compare.Load(nl, newPos)
	if err != nil {
		return fail(env, ExitError, "%v", err)
	}
	c, err := compare.Compare(base, nw, o)
	if err != nil {
		return fail(env, ExitUsage, "%v", err)
	}
	_ = report.Text(env.Stdout, report.ComparisonSummary(c, bl, nl, len(basePos), len(newPos)))
	if out != "" {
		md, html, err := writeDoc(out, report.ForComparison(c))
		if err == nil {
			err = writeJSONFile(filepath.Join(out, "compare.json"), c)
		}
		if err != nil {
			return fail(env, ExitError, "%v", err)
		}
		fmt.Fprintf(env.Stdout, "\nreport: %s\n        %s\n        %s\n", md, html, filepath.Join(out, "compare.json"))
	}
	return gate(env, c, gates, failOn)
}

// compareSides parses compare's arguments, flags on either side of --vs,
// into the base's and the new side's result directories.
func compareSides(env Env, fs *flag.FlagSet, args []string) (basePos, newPos []string, code int, ok bool) {
	baseArgs, newArgs := splitVs(args)
	if newArgs == nil {
		if _, code, ok := parse(env, fs, args); !ok {
			return nil, nil, code, false
		}
		return nil, nil, usageError(env, fs, "compare needs the base runs, then --vs and the new runs"), false
	}
	if basePos, code, ok = parse(env, fs, baseArgs); !ok {
		return nil, nil, code, false
	}
	if newPos, code, ok = parse(env, fs, newArgs); !ok {
		return nil, nil, code, false
	}
	if len(basePos) == 0 || len(newPos) == 0 {
		return nil, nil, fail(env, ExitUsage, "compare needs at least one result directory on each side of --vs (got %d and %d)", len(basePos), len(newPos)), false
	}
	return basePos, newPos, 0, true
}

// parseGates reads --fail-on, each limit a number.
func parseGates(failOn string) ([]compare.Gate, error) {
	gates, err := compare.ParseFailOn(failOn)
	if err != nil {
		return nil, err
	}
	for _, g := range gates {
		if !finite(g.Limit) {
			return nil, fmt.Errorf("--fail-on %s:%g: the limit must be a number, e.g. %s:+10%%", g.Key, g.Limit, g.Key)
		}
	}
	return gates, nil
}

// gate says whether c breaches any of --fail-on's gates: FAIL and
// ExitRegression if so, PASS if there were gates and none was breached.
func gate(env Env, c *compare.Comparison, gates []compare.Gate, failOn string) int {
	if breaches := c.Breaches(gates); len(breaches) > 0 {
		fmt.Fprintf(env.Stdout, "\nFAIL: %d change(s) beyond --fail-on %s:\n", len(breaches), failOn)
		for _, b := range breaches {
			fmt.Fprintf(env.Stdout, "  %s\n", b)
		}
		return ExitRegression
	}
	if len(gates) > 0 {
		fmt.Fprintf(env.Stdout, "\nPASS: no change beyond --fail-on %s\n", failOn)
	}
	return ExitOK
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
