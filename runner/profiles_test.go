package runner

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/testbed"
)

// TestProfilesNameTheSetupsHash: a testbed that hashes every sign-up's and
// login's password with PBKDF2 (real CPU, in testbed.hashPassword) and
// serves pprof; a run with --profile in 1 s slices finds the hash
// spending most of the CPU of users' setup and next to none of the
// window's, writes every slice and each phase's merge where go tool pprof
// reads them, and an endpoint that is no pprof is a warning, said once,
// not a failed run. On loopback, in real time: a CPU profile is the
// process's own (the testbed runs in this one).
func TestProfilesNameTheSetupsHash(t *testing.T) {
	srv := httptest.NewServer(testbed.New(testbed.Config{Pprof: true, HashRounds: 300_000}).Handler())
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)
	out := filepath.Join(t.TempDir(), "run")
	var warned []string
	res, err := (&Bounded{Common: Common{Scenario: load(t, postsScenario(time.Second)), Target: target, Seed: 1, Timeout: time.Minute, Grace: time.Second,
		Out: out, Profile: []string{srv.URL + "/debug/pprof", srv.URL + "/metrics"}, ProfileSlice: time.Second,
		Warn: func(s string) { warned = append(warned, s) }}, Users: 30, Ramp: 3 * time.Second, Duration: 4 * time.Second}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != result.Completed || res.Profiles == nil {
		t.Fatalf("status %s, profiles %+v, notes %q", res.Status, res.Profiles, res.Notes)
	}
	phases := map[string]result.ProfilePhase{}
	for _, ph := range res.Profiles.Phases {
		if ph.Target != 0 {
			t.Errorf("a phase of target %d, which serves no profile: %+v", ph.Target, ph)
		}
		phases[ph.Phase] = ph
	}
	hash := func(ph result.ProfilePhase) float64 {
		for _, f := range ph.Cum {
			if strings.HasSuffix(f.Name, "testbed.hashPassword") {
				return f.CumPc
			}
		}
		return 0
	}
	setup, window := phases["setup"], phases["window"]
	t.Logf("setup: %d profiles, %.2f cores, %.1f ms a user, hashPassword %.0f%%; window: %d profiles, %.2f cores, hashPassword %.0f%%",
		setup.Slices, setup.CPUCores, setup.PerUnitMs, hash(setup), window.Slices, window.CPUCores, hash(window))
	if setup.Slices == 0 || hash(setup) < 50 || setup.Unit != "user set up" || setup.PerUnitMs <= 0 {
		t.Errorf("setup phase %+v: want hashPassword at least half its CPU, and CPU per user set up", setup)
	}
	if window.Slices == 0 || hash(window) > 10 {
		t.Errorf("window phase: %d profiles, hashPassword %.0f%%: want it next to nothing (no login in the window)", window.Slices, hash(window))
	}
	files, bad := 0, 0
	for _, sl := range res.Profiles.Slices {
		switch {
		case sl.Target == 0 && sl.File != "":
			files++
			readProfile(t, filepath.Join(out, sl.File))
		case sl.Target == 1 && sl.Error != "":
			bad++
		}
	}
	if files < 5 || bad == 0 {
		t.Errorf("%d profiles written of target 1, %d failed slices of the /metrics one: want at least 5, and some", files, bad)
	}
	readProfile(t, filepath.Join(out, setup.File))
	if h := setup.Heap; h == nil || h.InuseMB <= 0 || h.AtS > setup.EndS+0.1 || h.File == "" || setup.Flame == nil {
		t.Errorf("setup's heap %+v, flame graph %v: want the heap in use at its end, and a flame graph", h, setup.Flame != nil)
	} else {
		readProfile(t, filepath.Join(out, h.File))
	}
	if len(warned) != 1 || !strings.Contains(warned[0], srv.URL+"/metrics") {
		t.Errorf("warnings %q: want one, of the endpoint that serves no profile", warned)
	}
}

func readProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := profile.Parse(f); err != nil {
		t.Errorf("%s: %v", path, err)
	}
}

// A step run's profiles are per level: each held window's merge, its CPU
// a request, named by its users. Real CPU profiles of the testbed in this
// process, in wall-clock time: a hold of 5 s has 4 whole 1 s slices when
// they come back on time, 2 or more when a busy machine delays them (a
// hold of 3.5 s failed beside three other engineers' builds).
func TestStepProfilesArePerLevel(t *testing.T) {
	srv := httptest.NewServer(testbed.New(testbed.Config{Pprof: true}).Handler())
	t.Cleanup(srv.Close)
	target, _ := url.Parse(srv.URL)
	res, err := (&Step{Common: Common{Scenario: load(t, postsScenario(100*time.Millisecond)), Target: target, Seed: 1, Grace: time.Second,
		Out: filepath.Join(t.TempDir(), "step"), Profile: []string{srv.URL + "/debug/pprof"}, ProfileSlice: time.Second},
		Levels: []int{5, 10}, Hold: 5 * time.Second, Settle: 500 * time.Millisecond, RampRate: 100}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]result.ProfilePhase{}
	for _, ph := range res.Profiles.Phases {
		got[ph.Phase] = ph
	}
	for _, name := range []string{"level 5", "level 10"} {
		ph, ok := got[name]
		if !ok || ph.Slices < 2 || ph.Unit != "request" || ph.PerUnitMs <= 0 || ph.File == "" {
			t.Errorf("%s: %+v (phases %v): want 2 profiles or more, CPU a request, a merged file", name, ph, res.Profiles.Phases)
		}
	}
}

// A ceiling's levels are profiled over their judged seconds, named by
// their users: a level held again is "(2)", the hold at the answer
// "hold N", a level with no time left out.
func TestCeilingProfilePhases(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	s := &session{start: t0}
	res := &result.Result{Ceiling: &result.Ceiling{Levels: []result.Level{{Users: 10, Start: 0, JudgeStart: 5, End: 20}, {Users: 20, Start: 20, End: 40},
		{Users: 10, Start: 40, JudgeStart: 45, End: 60}, {Users: 10, Start: 60, End: 80, Hold: true}, {Users: 15, Start: 80, End: 80}}}}
	var got []string
	for _, ph := range s.levelPhases(res) {
		got = append(got, fmt.Sprintf("%s [%v, %v)", ph.name, ph.from.Sub(t0).Seconds(), ph.to.Sub(t0).Seconds()))
	}
	want := []string{"level 10 [5, 20)", "level 20 [20, 40)", "level 10 (2) [45, 60)", "hold 10 [60, 80)"}
	if !slices.Equal(got, want) {
		t.Errorf("phases %q, want %q", got, want)
	}
}

// A --profile URL with credentials: they reach the server (basic auth),
// and nothing headroom writes or says holds the password: not
// result.json's targets, slices' errors and notes, nor a warning about a
// target that refuses.
func TestProfileCredentialsAreNeverWritten(t *testing.T) {
	t.Parallel()
	fn := &profile.Function{ID: 1, Name: "main.work"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
	cpu := &profile.Profile{SampleType: []*profile.ValueType{{Type: "cpu", Unit: "nanoseconds"}}, PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period: 1e7, Function: []*profile.Function{fn}, Location: []*profile.Location{loc}, Sample: []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{1e7}}}}
	var body bytes.Buffer
	if err := cpu.Write(&body); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/debug/pprof/profile" {
			http.NotFound(w, r)
			return
		}
		asked.Add(1)
		s, _ := strconv.Atoi(r.URL.Query().Get("seconds"))
		select { // a profile takes its seconds
		case <-time.After(time.Duration(s) * time.Second):
		case <-r.Context().Done():
			return
		}
		w.Write(body.Bytes())
	}))
	defer srv.Close()
	withPass := strings.Replace(srv.URL, "http://", "http://admin:s3cret@", 1) + "/debug/pprof"
	refused := "http://admin:s3cret@127.0.0.1:1/debug/pprof"
	out := filepath.Join(t.TempDir(), "run")
	var warned []string
	var mu sync.Mutex
	res, err := (&Bounded{Common: Common{Scenario: load(t, "def a(user):\n    user.http.get('/get')\nactions = [action('A', a)]\nthink_time = think.constant('100ms')\n"),
		Target: httpbinServer(t), Grace: time.Second, Out: out, Profile: []string{withPass, refused}, ProfileSlice: time.Second,
		Warn: func(s string) { mu.Lock(); warned = append(warned, s); mu.Unlock() }}, Users: 1, Duration: 2500 * time.Millisecond}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if asked.Load() == 0 || res.Profiles == nil || len(res.Profiles.Targets) != 2 || !strings.Contains(res.Profiles.Targets[0], "admin:xxxxx@") {
		t.Fatalf("profiles asked %d times; result's %+v", asked.Load(), res.Profiles)
	}
	mu.Lock()
	said := strings.Join(warned, "\n")
	mu.Unlock()
	if !strings.Contains(said, "127.0.0.1:1") || strings.Contains(said, "s3cret") {
		t.Errorf("warnings: %s", said)
	}
	filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("s3cret")) {
				t.Errorf("%s holds the password", path)
			}
		}
		return nil
	})
}
