package cli

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/testing/memhttp"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

func TestParseRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
	}{{"500", 500}, {"500/s", 500}, {" 30/m", 0.5}, {"30/min", 0.5}, {"7200/h", 2}, {"0.25/s", 0.25}, {"0", 0}} {
		got, err := parseRate(c.in)
		if err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("parseRate(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "fast", "-1/s", "5/d", "NaN", "Inf/s", "1e9/s"} {
		if got, err := parseRate(in); err == nil {
			t.Errorf("parseRate(%q) = %v, want an error", in, got)
		}
	}
}

func TestRateStagesParse(t *testing.T) {
	var v stagesValue
	if err := v.Set("100/s:30s, 500:1m,0/s:0s"); err != nil {
		t.Fatal(err)
	}
	want := []engine.Stage{{Target: 100, Duration: 30 * time.Second}, {Target: 500, Duration: time.Minute}, {Target: 0, Duration: 0}}
	if len(v.stages) != len(want) {
		t.Fatalf("stages %+v, want %+v", v.stages, want)
	}
	for i := range want {
		if v.stages[i] != want[i] {
			t.Errorf("stage %d: %+v, want %+v", i+1, v.stages[i], want[i])
		}
	}
	for _, in := range []string{"100/s", "100/s:", "x:30s", "100/s:-1s", "100/s:30s,,"} {
		if err := new(stagesValue).Set(in); err == nil {
			t.Errorf("--rate-stages %q taken", in)
		}
	}
}

// resolveOpen parses run's flags of the open model from args.
func resolveOpen(t *testing.T, args ...string) (*openFlagsResult, error) {
	t.Helper()
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&f.users, "users", 10, "")
	fs.DurationVar(&f.ramp, "ramp", 0, "")
	fs.DurationVar(&f.duration, "duration", time.Minute, "")
	f.open.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o, err := f.open.resolve(fs, f.duration)
	if o == nil {
		return nil, err
	}
	return &openFlagsResult{maxUsers: o.MaxUsers, preUsers: o.PreUsers, length: o.Rate.Length(), peak: o.Rate.Peak(), spacing: o.Arrivals, maxWait: o.MaxWait}, err
}

type openFlagsResult struct {
	maxUsers, preUsers int
	length             time.Duration
	peak               float64
	spacing            engine.Spacing
	maxWait            time.Duration
}

// TestOpenFlagsResolve: the defaults (a pool of the peak rate × 1 s, at
// least 10, all set up first; even arrivals; no wait) and what the flags
// change.
func TestOpenFlagsResolve(t *testing.T) {
	for _, c := range []struct {
		args []string
		want openFlagsResult
	}{
		{[]string{"--rate", "500/s", "--duration", "20s"}, openFlagsResult{500, 500, 20 * time.Second, 500, engine.Even, 10 * time.Millisecond}},
		{[]string{"--rate", "3/s", "--max-wait", "0"}, openFlagsResult{10, 10, time.Minute, 3, engine.Even, 0}},
		{[]string{"--rate-stages", "100/s:30s,250.5/s:1m"}, openFlagsResult{251, 251, 90 * time.Second, 250.5, engine.Even, 10 * time.Millisecond}},
		{[]string{"--rate", "10", "--rate-stages", "40/s:10s", "--max-users", "8", "--pre-users", "2", "--max-wait", "300ms", "--arrivals", "poisson"},
			openFlagsResult{8, 2, 10 * time.Second, 40, engine.Poisson, 300 * time.Millisecond}},
	} {
		got, err := resolveOpen(t, c.args...)
		if err != nil || got == nil || *got != c.want {
			t.Errorf("%v: %+v, %v; want %+v", c.args, got, err, c.want)
		}
	}
	if got, err := resolveOpen(t, "--users", "5"); got != nil || err != nil {
		t.Errorf("no --rate: %+v, %v; want the closed model", got, err)
	}
}

// TestOpenFlagsRefusedBeforeTraffic: mistakes in the open model's flags
// are usage errors: exit 2, a message
// saying what to do, no request sent, no result written.
func TestOpenFlagsRefusedBeforeTraffic(t *testing.T) {
	refusedBeforeTraffic(t, "run", []refusal{
		{[]string{"--rate", "10/s", "--users", "5"}, "--users is the closed model's"},
		{[]string{"--rate", "10/s", "--ramp", "5s"}, "--ramp is the closed model's"},
		{[]string{"--max-users", "5"}, "--max-users is for the open model"},
		{[]string{"--arrivals", "poisson"}, "--arrivals is for the open model"},
		{[]string{"--rate", "0/s"}, "--rate must be more than 0"},
		{[]string{"--rate", "fast"}, "want a number of arrivals"},
		{[]string{"--rate-stages", "10/s:5s", "--duration", "5s"}, "--duration with --rate-stages"},
		{[]string{"--rate-stages", "0/s:5s"}, "never rise above 0"},
		{[]string{"--rate-stages", "10/s:0s"}, "last 0s in all"},
		{[]string{"--rate", "10/s", "--max-users", "0"}, "--max-users must be at least 1"},
		{[]string{"--rate", "10/s", "--max-users", "4", "--pre-users", "5"}, "--pre-users must be 0 to --max-users (4)"},
		{[]string{"--rate", "10/s", "--arrivals", "burst"}, `--arrivals "burst": want even or poisson`},
		{[]string{"--connections", "4"}, "--connections is for the open model"},
		{[]string{"--rate", "10/s", "--connections", "-2"}, "--connections must be 0 (each user its own) or more"},
	})
}

// TestRateLevelsRefusedBeforeTraffic: step --rates and ceiling --open
// refuse mistakes, and the closed model's flags, as run --rate does:
// exit 2, what to do, no request sent, no result written.
func TestRateLevelsRefusedBeforeTraffic(t *testing.T) {
	refusedBeforeTraffic(t, "", []refusal{
		{[]string{"step", "--rates", "10,20", "--levels", "5,10"}, "give one of them"},
		{[]string{"step", "--rates", "20,10"}, "rates must increase: 10/s comes after 20/s"},
		{[]string{"step", "--rates", "10,30/m"}, `"30/m" is 0.5 arrivals a second: levels are whole arrivals per second`},
		{[]string{"step", "--rates", "0,10"}, "each rate must be at least 1"},
		{[]string{"step", "--rates", "10,fast"}, "want a number of arrivals"},
		{[]string{"step", "--rates", "10,20", "--ramp-rate", "5"}, "--ramp-rate is the closed model's"},
		{[]string{"step", "--rates", "10,20", "--max-users", "4", "--pre-users", "5"}, "--pre-users must be 0 to --max-users (4)"},
		{[]string{"step", "--levels", "5,10", "--arrivals", "poisson"}, "--arrivals is for the open model: give --rates too"},
		{[]string{"step", "--levels", "5,10", "--max-users", "50"}, "--max-users is for the open model: give --rates too"},
		{[]string{"ceiling", "--start-rate", "50"}, "--start-rate is for the open model: give --open too"},
		{[]string{"ceiling", "--open", "--start-users", "5"}, "--start-users is the closed model's"},
		{[]string{"ceiling", "--open", "--controller", "linear"}, "--open takes the search controller"},
		{[]string{"ceiling", "--open", "--start-rate", "50", "--max-rate", "10"}, "--max-rate (10) at least --start-rate"},
		{[]string{"ceiling", "--open", "--max-wait", "-1s"}, "--max-wait must be 0 or more"},
		{[]string{"step", "--rates", "10,20", "--connections", "-1"}, "--connections must be 0 (each user its own) or more"},
		{[]string{"ceiling", "--connections", "4"}, "--connections is for the open model: give --open too"},
	})
}

// refusal is a command line refused before traffic: its args, and what
// stderr must say.
type refusal struct {
	args []string
	want string
}

// refusedBeforeTraffic runs cmd (or, when cmd is "", each case's first
// arg) on a scenario against a server with each case's args: each must
// exit 2 saying what to do, create no --out, and send no request.
func refusedBeforeTraffic(t *testing.T, cmd string, cases []refusal) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer srv.Close()
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/')\nactions = [action('A', a)]\n")
	for _, c := range cases {
		name, rest := cmd, c.args
		if name == "" {
			name, rest = c.args[0], c.args[1:]
		}
		out := filepath.Join(dir, "out")
		code, _, stderr := headroom(t, append([]string{name, sc, "--target", srv.URL, "--out", out}, rest...)...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 and %q", c.args, code, stderr, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: --out was created", c.args)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests reached the target", n)
	}
}

// TestRunAtARate: run --rate prints both latencies, each labelled, and
// the arrivals table; result.json records the model, the rate, the
// arrivals and the service times. In virtual time, the server in memory.
func TestRunAtARate(t *testing.T) {
	synctest.Test(t, runAtARate)
}

func runAtARate(t *testing.T) {
	dial := memhttp.Dial(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/', name='GET /')\nactions = [action('A', a)]\n")
	out := filepath.Join(dir, "out")
	code, stdout, stderr := headroomDialing(dial, "run", sc, "--target", memTarget, "--rate", "40/s", "--duration", "2s", "--out", out, "--no-report")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"Open model at 40/s for 2s:", "Latency from the intended start: from when each arrival was due",
		"Service time The same requests timed from their actual send", "Arrivals: 80 intended (40/s)",
	} {
		if !says(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "open model, 40/s for 2s, even arrivals; a pool of up to 40 users (40 set up first)") {
		t.Errorf("stderr does not say what runs:\n%s", stderr)
	}
	var r struct {
		Config struct {
			Model string `json:"model"`
			Rate  struct {
				PerSecond float64 `json:"per_second"`
				MaxUsers  int     `json:"max_users"`
			} `json:"rate"`
		} `json:"config"`
		Arrivals struct {
			Intended, Started, Dropped int64
		} `json:"arrivals"`
		Service struct {
			Requests []struct{ Name string } `json:"requests"`
		} `json:"service_time"`
	}
	b, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Config.Model != "open" || r.Config.Rate.PerSecond != 40 || r.Config.Rate.MaxUsers != 40 {
		t.Errorf("config: %+v", r.Config)
	}
	if a := r.Arrivals; a.Intended != 80 || a.Started != a.Intended || a.Dropped != 0 {
		t.Errorf("arrivals: %+v; want the 80 of 40/s for 2 s, all started", a)
	}
	if len(r.Service.Requests) != 1 || r.Service.Requests[0].Name != "GET /" {
		t.Errorf("service times: %+v", r.Service)
	}
}

// TestRunHelpTeachesTheRate: run --help explains the open model's flags
// with examples.
func TestRunHelpTeachesTheRate(t *testing.T) {
	code, _, stderr := headroom(t, "run", "--help")
	for _, want := range []string{"--rate 500/s --duration 60s", "--rate-stages \"100/s:30s,500/s:60s,500/s:5m\"", "--arrivals poisson",
		"-max-users", "-pre-users", "-max-wait", "intended start", "service time", "dropped", "coordinated omission"} {
		if code != ExitOK || !strings.Contains(stderr, want) {
			t.Errorf("run --help (exit %d) lacks %q", code, want)
		}
	}
}

// TestStepAtRatesOnTheExampleAPI: step --rates with examples/api.star
// against the testbed (8 workers, its mix 44 ms a request at --scale 10:
// 181.8/s). Each level prints both latencies and its arrivals; the
// levels table and the knee are in arrivals per second, the knee at the
// last rate under the capacity; result.json says its unit. On a machine
// busy with the rest of the suite the generator may start a level's few
// arrivals (80 at 40/s in 2 s) more than 50 ms late at p99: the run then
// says that level's load was untrue and leaves it out of the knee, which
// is the truth, and the knee is not asked for (a fresh clone's CI met p99
// 54 and 64 ms at 40 and 120/s).
func TestStepAtRatesOnTheExampleAPI(t *testing.T) {
	t.Parallel()
	synctest.Test(t, stepAtRates)
}

// stepAtRates runs in virtual time, the testbed in memory (Env.Dial): the
// generator is never late there, so the knee is always the run's to find.
func stepAtRates(t *testing.T) {
	dial := memhttp.Dial(t, testbed.New(testbed.Config{Workers: 8, Scale: 10}).Handler())
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := headroomDialing(dial, "step", filepath.Join("..", "examples", "api.star"), "--target", memTarget,
		"--rates", "40,120,360", "--hold", "2s", "--settle", "1s", "--max-users", "120", "--out", out, "--no-report", "--quiet")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"arrivals/s req/s mean (ms) p50 (ms) p95 (ms) p99 (ms) errors held dropped late service p95 (ms)",
		"Latencies count from each arrival's intended start; the service time from the request's actual send.",
		"knee at 120/s: from 120 to 360/s (+200%)",
	} {
		if !says(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "40, 120, 360 arrivals/s, each held 2s after 1s settling; open model, even arrivals; a pool of up to 120 users (120 set up first)") {
		t.Errorf("stderr does not say what runs:\n%s", stderr)
	}
	r, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Step.Unit != result.UnitRate || r.Config.Model != result.ModelOpen || len(r.Step.Levels) != 3 || r.Config.Rate.PeakPerSecond != 360 {
		t.Fatalf("result: unit %q, model %q, %d levels, rate %+v", r.Step.Unit, r.Config.Model, len(r.Step.Levels), r.Config.Rate)
	}
	if top := r.Step.Levels[2]; top.Arrivals == nil || top.Arrivals.Dropped == 0 || top.Totals.RPS > 190 {
		t.Errorf("360/s on a testbed of 181.8/s: %.1f req/s, arrivals %+v; want the capacity and drops", top.Totals.RPS, top.Arrivals)
	}
}

// TestStepAndCeilingHelpTeachRates: step and ceiling --help explain their
// open model, with examples.
func TestStepAndCeilingHelpTeachRates(t *testing.T) {
	for cmd, wants := range map[string][]string{
		"step":    {"--rates 100,200,400,800", "-rates", "-max-users", "-pre-users", "-max-wait", "-arrivals", "intended start"},
		"ceiling": {"examples/api.star --target http://127.0.0.1:8065 --open", "-open", "-start-rate", "-max-rate", "supported arrival rate", "dropped arrivals"},
	} {
		code, _, stderr := headroom(t, cmd, "--help")
		for _, want := range wants {
			if code != ExitOK || !strings.Contains(stderr, want) {
				t.Errorf("%s --help: exit %d, lacks %q", cmd, code, want)
			}
		}
	}
}

// TestRunAtARateOverSharedConnections: with --connections 2 the pool's
// users share two keep-alive connections. A server of 25 ms a request
// serves 80/s over them: at 100/s the requests queue for a connection,
// and the wait shows in the latency from the intended start while the
// service time stays the server's 25 ms. The users' requests go over two
// connections. In virtual time, the server in memory: the 25 ms exact.
func TestRunAtARateOverSharedConnections(t *testing.T) {
	synctest.Test(t, sharedConnections)
}

func sharedConnections(t *testing.T) {
	serve := memhttp.Dial(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { time.Sleep(25 * time.Millisecond) }))
	var mu sync.Mutex
	var conns []*countedConn
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := serve(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &countedConn{Conn: c}
		mu.Lock()
		conns = append(conns, cc)
		mu.Unlock()
		return cc, nil
	}
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/', name='GET /')\nactions = [action('A', a)]\n")
	out := filepath.Join(dir, "out")
	// As many users as the second's 100 arrivals: every queued arrival
	// holds a user, so none is dropped while the backlog waits.
	code, stdout, stderr := headroomDialing(dial, "run", sc, "--target", memTarget, "--rate", "100/s", "--duration", "1s", "--max-users", "100",
		"--connections", "2", "--out", out, "--no-report", "--quiet")
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "sharing 2 connections") {
		t.Errorf("stderr does not say the connections were shared:\n%s", stderr)
	}
	r, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	var writes []int64
	for _, c := range conns {
		writes = append(writes, c.writes.Load())
	}
	mu.Unlock()
	if len(writes) != 2 || writes[0] == 0 || writes[1] == 0 {
		t.Errorf("connections dialled, with the writes made on each: %v; want 2, both used", writes)
	}
	if r.Config.Rate.Connections != 2 || !strings.Contains(r.Config.Connections, "2 keep-alive shared") {
		t.Errorf("config: connections %q, rate %+v", r.Config.Connections, r.Config.Rate)
	}
	sv := r.ServiceTimes.Totals
	if r.Arrivals.Dropped != 0 || r.Totals.Errors != 0 || sv.P50Ms < 25 || sv.P50Ms > 25.1 || r.Totals.P99Ms < 100 {
		t.Errorf("dropped %d, errors %d; service p50 %.1f ms (want the server's 25), from the intended start p99 %.1f ms (want the queue's wait, over 100)",
			r.Arrivals.Dropped, r.Totals.Errors, sv.P50Ms, r.Totals.P99Ms)
	}
}

// countedConn counts the writes made on a connection.
type countedConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}
