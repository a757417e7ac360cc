package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/headroom-dev/headroom/compare"
	"github.com/headroom-dev/headroom/report"
	"github.com/headroom-dev/headroom/result"
)

const reportHelp = `
Writes the report of a result directory: report.md with its PNG charts,
ready to paste into release notes, and report.html, one self-contained
file that opens offline. run, step and ceiling write it into their result
directory by themselves; use this to write it elsewhere, or again.

Given several ceiling results, it writes a ceiling matrix instead: one row
per configuration with the supported users (mean of its repeats, their
spread) and the bottleneck. Directories whose names differ only by a
trailing -N or _N are repeats of one configuration (runs/arm64-1,
runs/arm64-2 -> arm64).

Examples:
  headroom report runs/ceil --out reports/ceil
  headroom report runs/arm64-1 runs/arm64-2 runs/arm64-3 runs/x86-1 runs/x86-2 runs/x86-3 --out reports/matrix

Exit codes: 0 written, 1 could not read a result or write the report, 2 bad
command line (a matrix of results that are not all ceilings, or without
--out), 5 an internal error (a bug in headroom).
`

func reportCmd(_ context.Context, env Env, args []string) int {
	var out string
	fs := newFlags(env, "report", "RESULT_DIR... [--out DIR]", reportHelp)
	fs.StringVar(&out, "out", "", "directory to write report.md, its charts and report.html into (default: the result directory; required for a matrix)")
	dirs, code, ok := parse(env, fs, args)
	if !ok {
		return code
	}
	if len(dirs) == 0 {
		return usageError(env, fs, "report needs at least one result directory")
	}
	var runs []*compare.Run
	for _, dir := range dirs {
		r, err := compare.ReadRun(dir)
		if err != nil {
			return fail(env, ExitError, "%v", err)
		}
		runs = append(runs, r)
	}
	var doc *report.Doc
	switch {
	case len(runs) == 1:
		doc = report.ForResult(runs[0].Result)
		if out == "" {
			out = dirs[0]
		}
	default:
		for _, r := range runs {
			if r.Result.Kind != "ceiling" {
				return fail(env, ExitUsage, "%s is a %q result: several results make a ceiling matrix, so all must be ceiling results; to set two builds side by side use headroom compare", r.Dir, r.Result.Kind)
			}
		}
		if out == "" {
			return fail(env, ExitUsage, "a matrix needs --out DIR")
		}
		doc = report.ForMatrix(groups(runs))
	}
	md, html, err := writeDoc(out, doc)
	if err != nil {
		return fail(env, ExitError, "%v", err)
	}
	fmt.Fprintf(env.Stdout, "report: %s\n        %s\n", md, html)
	return ExitOK
}

var repeatSuffix = regexp.MustCompile(`[-_]\d+$`)

// groups groups ceiling runs into configurations by directory name.
func groups(runs []*compare.Run) []report.Group {
	var out []report.Group
	index := map[string]int{}
	for _, r := range runs {
		name := repeatSuffix.ReplaceAllString(filepath.Base(r.Dir), "")
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, report.Group{Name: name})
		}
		out[i].Dirs = append(out[i].Dirs, r.Dir)
		out[i].Results = append(out[i].Results, r.Result)
	}
	return out
}

// writeDoc writes both forms of a report into dir.
func writeDoc(dir string, d *report.Doc) (md, html string, err error) {
	if md, err = report.WriteMarkdown(dir, d); err != nil {
		return "", "", fmt.Errorf("write report: %w", err)
	}
	if html, err = report.WriteHTML(dir, d); err != nil {
		return "", "", fmt.Errorf("write report: %w", err)
	}
	return md, html, nil
}

// writeReports writes the report of a run that just finished into its
// result directory and says where it is. A failure here does not fail the
// run: the result is written already.
func writeReports(env Env, out string, res *result.Result, skip bool) {
	if skip || out == "" {
		return
	}
	md, html, err := writeDoc(out, report.ForResult(res))
	if err != nil {
		fmt.Fprintf(env.Stderr, "warning: %v (the result is written; try headroom report %s)\n", err, out)
		return
	}
	fmt.Fprintf(env.Stdout, "report: %s\n        %s\n", md, html)
}
