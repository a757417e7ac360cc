package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/runner"
)

// outDir is the result directory of a run about to start: --out, or a
// new runs/<time> reserved for it. If the run never starts, release
// removes the directory when this run created it and left it empty.
type outDir struct {
	path    string
	created bool
}

// reserve picks and, for the default, creates the result directory.
func (f *loadFlags) reserve(env Env) (*outDir, int, bool) {
	if f.out != "" {
		_, err := os.Stat(f.out)
		return &outDir{path: f.out, created: errors.Is(err, os.ErrNotExist)}, 0, true
	}
	dir, err := result.Writer{}.NewDir("runs", "", time.Now())
	if err != nil {
		return nil, fail(env, ExitError, "cannot create a result directory under runs/: %v\n  hint: give one with --out", err), false
	}
	return &outDir{path: dir, created: true}, 0, true
}

// release undoes reserve for a run that never started.
func (o *outDir) release() {
	if o.created {
		_ = os.Remove(o.path) // only if empty
	}
}

// finish reports a run that went its course: the tables (print), where
// the result is, the report, and the exit code. err is Run's error; a
// run that returned no result never started.
func finish(env Env, out *outDir, res *result.Result, err error, noReport bool, print func(io.Writer, *result.Result)) int {
	if res == nil {
		out.release()
		return fail(env, ExitError, "%v", err)
	}
	print(env.Stdout, res)
	where := out.path
	var we *runner.WriteError
	if errors.As(err, &we) {
		where = we.Fallback
	} else if err != nil {
		where = ""
	}
	if where != "" {
		fmt.Fprintf(env.Stdout, "\nresult: %s\n", filepath.Join(where, result.ResultFile))
		writeReports(env, where, res, noReport)
	}
	if err != nil {
		return fail(env, ExitError, "%v", err)
	}
	if res.Status == result.Failed {
		for _, n := range res.Notes {
			if strings.HasPrefix(n, "the run measured nothing") {
				fmt.Fprintf(env.Stderr, "headroom: %s\n", n)
			}
		}
		return ExitNothing
	}
	return ExitOK
}
