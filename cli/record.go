package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/record"
)

const recordHelp = `
Records a browser session as a HAR file for 'headroom convert': a headless
Chromium opens the page at URL and takes the steps given, in the order
given (--visit, --click, --type, --press, --eval, --wait, or --steps FILE
with one step a line); after each it waits until the page has loaded and
no request has been in flight for --settle. What reached the server is
written: each request with its headers and body, each response with its
status, headers and (for pages, XHR and fetch) its body, each hop of a
redirect, the pages with their titles, and when each request started and
where its time went. Requests the browser's cache answered, and those that
got no response, are left out and counted; the bodies of scripts, style
sheets, images and fonts are not kept (convert leaves them out).

The pauses between pages become the converted scenario's think time: add
--wait where a person would read. Chromium's own cookies are not written
(a scenario's users keep their own), only the headers the page set.

Loopback only: every URL visited must be on this machine (127.0.0.1, ::1,
localhost), and the page's requests to other hosts are refused without
leaving it (a script from a CDN, analytics); --allow-remote lifts both.

Needs Chromium: Debian's at /usr/bin/chromium (apt-get install chromium),
or --chromium PATH.

Steps:
` + "%s" + `
Examples:
  # Prometheus's web UI: a query typed and run, the graph tab, the targets page
  headroom record http://127.0.0.1:9090/graph \
      --click 'textarea[name=expr]' --type 'rate(prometheus_http_requests_total[1m])' --click .execute_btn \
      --wait 2s --click 'a[href="#graph0"]' --wait 2s --visit /classic/targets --out prometheus.har
  headroom convert prometheus.har    # writes prometheus.star
  headroom run prometheus.star --target http://127.0.0.1:9090 --users 50 --duration 30s

  # the same steps in a file, one a line ("click .execute_btn", "wait 2s"; # comments)
  headroom record http://127.0.0.1:9090/graph --steps session.steps --out prometheus.har

Exit codes: 0 written; 1 Chromium could not start, a page failed to load, a
step failed or a bound was passed (what was recorded before is written,
and the message says so); 2 bad command line, or --out exists.
`

// stepFlag is one of the step flags: each time it is given it adds its
// step to the one list, so the steps keep the command line's order.
type stepFlag struct {
	verb  string
	steps *[]record.Step
}

func (f stepFlag) String() string { return "" }
func (f stepFlag) Set(v string) error {
	if f.verb == "steps" {
		r, err := os.Open(v)
		if err != nil {
			return err
		}
		defer r.Close()
		steps, err := record.ParseSteps(r, v)
		if err != nil {
			return err
		}
		*f.steps = append(*f.steps, steps...)
		return nil
	}
	s, err := record.ParseStep(f.verb, v)
	if err != nil {
		return err
	}
	*f.steps = append(*f.steps, s)
	return nil
}

func recordCmd(ctx context.Context, env Env, args []string) int {
	var steps []record.Step
	var out string
	var force bool
	opt := record.Options{Creator: record.Creator{Name: "headroom", Version: Version}}
	var verbs strings.Builder
	for _, v := range record.Verbs {
		fmt.Fprintf(&verbs, "  --%-6s %-9s %s\n", v.Name, v.Arg, v.Does)
	}
	fmt.Fprintf(&verbs, "  --%-6s %-9s %s\n", "steps", "FILE", "the steps in a file, one a line: visit URL, click SELECTOR, type TEXT, …")
	fs := newFlags(env, "record", "URL [steps] [--out SESSION.har]", fmt.Sprintf(recordHelp, verbs.String()))
	for _, v := range record.Verbs {
		fs.Var(stepFlag{v.Name, &steps}, v.Name, "step: "+v.Does+" (repeatable; steps keep their order)")
	}
	fs.Var(stepFlag{"steps", &steps}, "steps", "steps from a file, one a line, where the flag stands among the others")
	fs.StringVar(&out, "out", "session.har", "the HAR file to write")
	fs.BoolVar(&force, "force", false, "overwrite --out if it exists")
	fs.StringVar(&opt.Chromium, "chromium", "/usr/bin/chromium", "the Chromium (or Chrome) to drive")
	fs.DurationVar(&opt.Settle, "settle", 500*time.Millisecond, "a step is done once no request has been in flight this long")
	fs.DurationVar(&opt.StepTimeout, "step-timeout", 30*time.Second, "bounds a step: a page to load, an element to appear, the network to settle")
	fs.DurationVar(&opt.MaxDuration, "max-duration", 2*time.Minute, "bounds the whole recording")
	fs.IntVar(&opt.MaxRequests, "max-requests", 1000, "bounds the requests recorded (each hop of a redirect counts)")
	fs.IntVar(&opt.MaxBody, "max-body", 4<<20, fmt.Sprintf("bounds one body kept, in bytes (at most %d); larger ones are left out and said", record.MaxBodyLimit))
	fs.BoolVar(&opt.AllowRemote, "allow-remote", false, "visit, and let the page reach, hosts other than this machine")
	pos, code, ok := parse(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 1 {
		return usageError(env, fs, "record takes one URL, the first page (then --visit for more), got %d: %s", len(pos), strings.Join(pos, " "))
	}
	if len(pos) == 1 {
		first, err := record.ParseStep("visit", pos[0])
		if err != nil {
			return usageError(env, fs, "%v", err)
		}
		steps = append([]record.Step{first}, steps...)
	}
	if opt.MaxRequests < 1 || opt.MaxBody < 1 || opt.MaxBody > record.MaxBodyLimit {
		return usageError(env, fs, "--max-requests and --max-body must be at least 1, --max-body at most %d", record.MaxBodyLimit)
	}
	if err := record.Check(steps, opt.AllowRemote); err != nil {
		return usageError(env, fs, "%v", err)
	}
	w, err := createOut(out, force)
	if errors.Is(err, os.ErrExist) {
		return fail(env, ExitUsage, "%s exists: give another --out, or --force to overwrite it", out)
	}
	if err != nil {
		return fail(env, ExitError, "%v", err)
	}
	opt.Steps = steps
	opt.Progress = func(line string) { fmt.Fprintln(env.Stderr, line) }
	rec, recErr := record.Record(ctx, opt)
	if rec == nil {
		w.Close()
		os.Remove(out)
		return fail(env, ExitError, "%v", recErr)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := errors.Join(enc.Encode(rec.File), w.Close()); err != nil {
		return fail(env, ExitError, "%s: %v", out, err)
	}
	printRecording(env, out, rec)
	if recErr != nil {
		return fail(env, ExitError, "%v; %s holds what was recorded before", recErr, out)
	}
	fmt.Fprintf(env.Stderr, "convert it: headroom convert %s --out %s\n", out, strings.TrimSuffix(filepath.Base(out), filepath.Ext(out))+".star")
	return ExitOK
}

// printRecording says what the HAR file at out holds and what was left out
// of it: the requests with no response and the page's own faults.
func printRecording(env Env, out string, rec *record.Recording) {
	l := rec.File.Log
	fmt.Fprintf(env.Stderr, "%s: %d requests on %d pages", out, len(l.Entries), len(l.Pages))
	if rec.Cached+rec.Failed+rec.Open > 0 {
		fmt.Fprintf(env.Stderr, "; left out: %d answered by the browser's cache, %d with no response, %d still waiting at the end", rec.Cached, rec.Failed, rec.Open)
	}
	fmt.Fprintln(env.Stderr)
	for _, f := range rec.Failures {
		fmt.Fprintf(env.Stderr, "  no response: %s\n", f)
	}
	for i, f := range rec.Logged {
		if i == 3 {
			fmt.Fprintf(env.Stderr, "  … and %d more faults the page logged\n", len(rec.Logged)-i)
			break
		}
		fmt.Fprintf(env.Stderr, "  the page logged: %s\n", f)
	}
}
