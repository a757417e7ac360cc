package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/headroom-dev/headroom/har"
)

const convertHelp = `
Turns a recorded browser session, a HAR file (Chromium's or Firefox's
DevTools: Network, "Save all as HAR with content"), into a scenario: the
requests to the application's origin, grouped by page in the order
recorded, with the recording's pauses as think time. Each value a response
gave and a later request sent (a token, a CSRF value, an id, a number) is
taken from that response as the scenario runs, so the scenario runs
against a fresh server without edits; each such correlation is listed in
the scenario's header, and so is every value that looks made for the
session but that no response gave (the client's own: look at those).
Scripts, style sheets, images and fonts are left out (--static keeps them),
and so are requests to other origins. Cookies need nothing: each user's
cookie jar keeps what the server sets.

Examples:
  headroom convert session.har                 # writes session.star
  headroom convert session.har --out flows/checkout.star --origin https://shop.example
  headroom run session.star --target http://127.0.0.1:8080 --users 10 --duration 1m

Exit codes: 0 written, 1 the file could not be read, converted or written,
2 bad command line.
`

func convertCmd(_ context.Context, env Env, args []string) int {
	var out, origin string
	var static, force bool
	fs := newFlags(env, "convert", "SESSION.har [--out SCENARIO.star]", convertHelp)
	fs.StringVar(&out, "out", "", "the scenario to write (default: the HAR file's name, .star, in the current directory)")
	fs.StringVar(&origin, "origin", "", "the application's origin, e.g. https://shop.example (default: the one most requests went to)")
	fs.BoolVar(&static, "static", false, "keep the pages' scripts, style sheets, images and fonts")
	fs.BoolVar(&force, "force", false, "overwrite --out if it exists")
	pos, code, ok := parse(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return usageError(env, fs, "convert needs exactly one HAR file, got %d arguments", len(pos))
	}
	if origin != "" {
		origin = strings.TrimSuffix(origin, "/")
	}
	if out == "" {
		out = strings.TrimSuffix(filepath.Base(pos[0]), filepath.Ext(pos[0])) + ".star"
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return fail(env, ExitError, "%v", err)
	}
	defer f.Close()
	l, err := har.Read(f)
	if err != nil {
		return fail(env, ExitError, "%s: %v", pos[0], err)
	}
	sc, err := har.Convert(l, har.Options{Source: pos[0], Static: static, Origin: origin})
	if err != nil {
		return fail(env, ExitError, "%s: %v", pos[0], err)
	}
	w, err := createOut(out, force)
	if errors.Is(err, os.ErrExist) {
		return fail(env, ExitUsage, "%s exists: give another --out, or --force to overwrite it", out)
	}
	if err == nil {
		_, err = w.Write(sc.Source)
		err = errors.Join(err, w.Close())
	}
	if err != nil {
		return fail(env, ExitError, "%v", err)
	}
	fmt.Fprintf(env.Stderr, "%s: %d requests to %s, %d correlations, %d values not correlated (listed in its header); %d static assets and %d other origins left out\n",
		out, sc.Kept, sc.Origin, len(sc.Correlations), len(sc.Uncorrelated), sc.Assets, len(sc.Elsewhere))
	fmt.Fprintf(env.Stderr, "run it: headroom run %s --target %s --users 10 --duration 1m\n", out, sc.Origin)
	return ExitOK
}

// createOut opens the file a command writes (--out): a new one, or with
// force one that exists, emptied. An existing one without force is
// os.ErrExist, which the command turns into "give another --out".
func createOut(out string, force bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	return os.OpenFile(out, flags, 0o644)
}
