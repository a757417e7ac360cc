package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every number a command takes refuses NaN, infinities and values out of
// range before anything is sent, and so do absurd durations; a mistake is
// printed first, with a one-line pointer to --help instead of the whole
// usage.
func TestBadNumbersAndArgumentsAreUsageErrors(t *testing.T) {
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def a(user):\n    pass\nactions = [action('A', a)]\n")
	nan := write(t, dir, "nan.star", "checks = [check('p99', 'up', threshold=float('nan'))]\n")
	target := "http://127.0.0.1:1" // never reached: each is refused first
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"ceiling", sc, "--precision", "NaN"}, `invalid value "NaN" for flag -precision: want a percentage in (0, 100)`},
		{[]string{"ceiling", sc, "--precision", "Inf"}, `invalid value "Inf" for flag -precision`},
		{[]string{"ceiling", sc, "--ramp-rate", "NaN"}, `invalid value "NaN" for flag -ramp-rate`},
		{[]string{"ceiling", sc, "--ramp-rate", "0"}, `invalid value "0" for flag -ramp-rate: want a number of users per second above 0`},
		{[]string{"ceiling", sc, "--checks", nan}, `nan.star:1:16: check "p99": threshold NaN is not a finite number`},
		{[]string{"ceiling", sc, "--linear-inc", "0"}, "--linear-inc and --linear-dec must be at least 1"},
		{[]string{"step", sc, "--levels", "1", "--ramp-rate", "+Inf"}, `invalid value "+Inf" for flag -ramp-rate`},
		{[]string{"run", sc, "--duration", "1000000h"}, "--duration 1000000h0m0s is longer than headroom allows (720h, 30 days)"},
		{[]string{"run", sc, "--ramp", "-1s"}, "--ramp must be 0 or more, got -1s"},
		{[]string{"run", sc, "--grace", "800h"}, "--grace 800h0m0s is longer than headroom allows"},
		{[]string{"step", sc, "--levels", "1", "--hold", "9000h"}, "--hold 9000h0m0s is longer"},
		{[]string{"ceiling", sc, "--max-duration", "-5m"}, "--max-duration must be 0 or more"},
		{[]string{"run", sc, "--users", "0"}, "--users must be at least 1"},
		{[]string{"run", sc, "--profile", "http://127.0.0.1:1/debug/pprof/profile"}, "give the pprof base (…/debug/pprof), not …/profile"},
		{[]string{"run", sc, "--profile", "127.0.0.1:8067"}, "want the server's pprof base URL"},
		{[]string{"run", sc, "--profile-slice", "500ms"}, "--profile-slice must be 1s or more"},
		{[]string{"run", sc, "--remote-write-label", "build=v2"}, "--remote-write-label labels what --out-remote-write sends"},
		{[]string{"run", sc, "--out-remote-write", "ftp://ann:s3cret@127.0.0.1/w"}, `--out-remote-write "ftp://ann:xxxxx@127.0.0.1/w" is not an http(s) URL`},
		{[]string{"step", sc, "--levels", "1", "--out-remote-write", "http://127.0.0.1:9090/api/v1/write", "--remote-write-label", "__name__=x"}, `--remote-write-label "__name__=x": want NAME=VALUE`},
		{[]string{"ceiling", sc, "--out-remote-write", "http://127.0.0.1:9090/api/v1/write", "--remote-write-label", "1x=y"}, `--remote-write-label "1x=y"`},
		{[]string{"run", sc, "--setup-retries", "-1"}, "--setup-retries must be 0 (never retry) or more"},
		{[]string{"run", sc, "--setup-only", "--rate", "10/s"}, "--setup-only measures how fast users are set up"},
		{[]string{"run", sc, "--server-latency", "myapp_rpc_seconds:rpc"}, "--server-latency reads a --scrape endpoint"},
		{[]string{"step", sc, "--levels", "1", "--server-latency", "myapp_rpc_seconds"}, `invalid value "myapp_rpc_seconds" for flag -server-latency: "myapp_rpc_seconds": want FAMILY:LABEL`},
		{[]string{"run", sc, "--max-memory", "NaN%"}, `invalid value "NaN%" for flag -max-memory: want a size such as 512MiB`},
		{[]string{"run", sc, "--max-memory", "150%"}, `invalid value "150%" for flag -max-memory`},
		{[]string{"step", sc, "--levels", "1", "--max-memory", "10MB"}, "10MB is too little for headroom itself; want at least 64MiB"},
		{[]string{"ceiling", sc, "--max-memory", "lots"}, `invalid value "lots" for flag -max-memory`},
		{[]string{"run", sc, "--max-body", "0B"}, `invalid value "0B" for flag -max-body: want a size such as 512KiB`},
		{[]string{"step", sc, "--levels", "1", "--max-body", "NaNMiB"}, `invalid value "NaNMiB" for flag -max-body`},
		{[]string{"ceiling", sc, "--max-body", "64"}, `invalid value "64" for flag -max-body`},
		{[]string{"run", sc, "--max-steps", "0"}, "--max-steps and --load-timeout must be more than 0"},
		{[]string{"run", sc, "--source-addrs", "127.0.0.9-127.0.0.1"}, `invalid value "127.0.0.9-127.0.0.1" for flag -source-addrs`},
		{[]string{"run", sc, sc}, "run needs exactly one scenario file, got 2 arguments: " + sc + " " + sc},
		{[]string{"run", sc, "--userz", "3"}, "flag provided but not defined: -userz"},
		{[]string{"compare", "a", "--vs", "b", "--confidence", "NaN"}, `invalid value "NaN" for flag -confidence: want a probability in (0.5, 1)`},
		{[]string{"compare", "a", "--vs", "b", "--confidence", "1"}, `invalid value "1" for flag -confidence`},
		{[]string{"compare", "a", "--vs", "b", "--min-effect", "nan%"}, `invalid value "nan%" for flag -min-effect`},
		{[]string{"compare", "a", "--vs", "b", "--fail-on", "p99:+NaN%"}, `--fail-on "p99:+NaN%": the change must be signed`},
		{[]string{"compare", "a", "--vs", "b", "--fail-on", "p99:+Inf%"}, "--fail-on p99:+Inf: the limit must be a number"},
		{[]string{"compare", "a", "b"}, "compare needs the base runs, then --vs and the new runs"},
		{[]string{"testbed", "--scale", "Inf"}, `invalid value "Inf" for flag -scale`},
		{[]string{"report"}, "report needs at least one result directory"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out := filepath.Join(dir, "out")
			args := c.args
			if args[0] == "run" || args[0] == "step" || args[0] == "ceiling" {
				args = append(args, "--target", target, "--out", out)
			}
			code, stdout, stderr := headroom(t, args...)
			if code != ExitUsage {
				t.Errorf("exit %d, want %d\n%s%s", code, ExitUsage, stdout, stderr)
			}
			if first, _, _ := strings.Cut(stderr, "\n"); !strings.Contains(first, c.want) {
				t.Errorf("the first line of stderr lacks %q:\n%s", c.want, stderr)
			}
			if strings.Contains(stderr, "Usage:") || strings.Contains(stderr, "Examples:") {
				t.Errorf("the whole usage was printed:\n%s", stderr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was created", out)
				os.RemoveAll(out)
			}
		})
	}
}

func TestHelpIsStillWhole(t *testing.T) {
	for _, args := range [][]string{{"run", "--help"}, {"run", "-h"}, {"step", "x.star", "--help"}, {"ceiling", "-help"}, {"compare", "-help"}, {"report", "-h"}, {"testbed", "-h"}} {
		code, _, stderr := headroom(t, args...)
		if code != ExitOK || !strings.Contains(stderr, "Usage:") || !strings.Contains(stderr, "Exit codes:") || !strings.Contains(stderr, "5 an internal error") && !strings.Contains(stderr, "5  an internal error") {
			t.Errorf("%v: exit %d:\n%s", args, code, stderr)
		}
		if args[0] == "run" || args[0] == "step" || args[0] == "ceiling" {
			for _, w := range []string{"Examples:", "4  the run measured nothing", "SIGABRT", "--max-memory", "--force"} {
				if !strings.Contains(stderr, w) {
					t.Errorf("%v: help lacks %q", args, w)
				}
			}
		}
	}
}

// More users than the open-files limit allows are refused before
// traffic, naming the limit and the fixes; a default --max-users is
// lowered to fit instead.
func TestUsersBeyondTheOpenFilesLimit(t *testing.T) {
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def a(user):\n    pass\nactions = [action('A', a)]\n")
	env := func(args ...string) Env {
		return Env{Args: args, Stdout: &strings.Builder{}, Stderr: &strings.Builder{}, Limits: func() Limits { return Limits{OpenFiles: 1000} }}
	}
	for _, c := range []struct {
		args []string
		what string
	}{
		{[]string{"run", sc, "--users", "2000"}, "--users 2000 needs 2064 open files"},
		{[]string{"step", sc, "--levels", "10,937"}, "--levels up to 937 users needs 1001 open files"},
		{[]string{"ceiling", sc, "--max-users", "5000"}, "--max-users 5000 needs 5064 open files"},
	} {
		e := env(append(c.args, "--target", "http://127.0.0.1:1", "--out", filepath.Join(dir, "out"))...)
		code := Main(context.Background(), e)
		stderr := e.Stderr.(*strings.Builder).String()
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, code, ExitUsage, stderr)
		}
		for _, w := range []string{c.what, "this process may open 1000 (ulimit -n)", "ulimit -n ", "at most 936 users", "more machines"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, stderr)
			}
		}
	}
	e := env("ceiling", sc, "--target", "http://127.0.0.1:1", "--out", filepath.Join(dir, "out"))
	code := Main(context.Background(), e)
	if stderr := e.Stderr.(*strings.Builder).String(); code != ExitError || !strings.Contains(stderr, "note: --max-users lowered from 10000 to 936") {
		t.Errorf("default --max-users: exit %d\n%s", code, stderr)
	}
	e = env("run", sc, "--users", "936", "--target", "http://127.0.0.1:1", "--out", filepath.Join(dir, "out"))
	if code := Main(context.Background(), e); code != ExitError {
		t.Errorf("936 users within a limit of 1000: exit %d, want %d (at the target)\n%s", code, ExitError, e.Stderr)
	}
}

func TestMaxMemoryResolves(t *testing.T) {
	env := Env{Limits: func() Limits { return Limits{Memory: 4 << 30} }}
	for text, want := range map[string]uint64{"50%": 2 << 30, "25%": 1 << 30, "512MiB": 512 << 20, "1.5GB": 1500000000, "0": 0} {
		f := loadFlags{}
		if err := f.memory.Set(text); err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if got := f.maxMemory(env); got != want {
			t.Errorf("--max-memory %s of 4 GiB: %d bytes, want %d", text, got, want)
		}
		if got := f.maxMemory(Env{}); text == "50%" && got != 0 {
			t.Errorf("50%% of an unknown memory: %d bytes, want no limit", got)
		}
	}
}
