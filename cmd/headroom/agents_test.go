package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/result"
)

// agentScenario reads a data file and what init returned, so both must
// reach the agents; init sends one request, which must be counted once.
const agentScenario = `
names = data.csv("names.csv")

def init(user):
    user.http.get("/healthz", name="init")
    return {"names": [r["name"] for r in names]}

def ping(user):
    if user.shared["names"][2] != "cy":
        fail("user.shared did not reach this user")
    user.http.get("/healthz", params={"who": names[user.id % 3]["name"]}, name="GET /healthz")

actions = [action("Ping", ping)]
think_time = think.constant("100ms")
`

// TestLocalAgents runs the same users in one process and on three local
// agent processes: the same users set up, the same figures within noise
// (their histograms merged exactly), init run once, on the coordinator.
func TestLocalAgents(t *testing.T) {
	dir := t.TempDir()
	star := filepath.Join(dir, "ping.star")
	for name, content := range map[string]string{star: agentScenario, filepath.Join(dir, "names.csv"): "name\nax\nbo\ncy\n"} {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	target := testbedURL(t)
	run := func(extra ...string) *result.Result {
		out := filepath.Join(t.TempDir(), "run")
		args := append([]string{"run", star, "--target", target, "--users", "30", "--ramp", "1s", "--duration", "8s", "--out", out, "--quiet", "--no-report"}, extra...)
		code, _, stdout, stderr := outcome(t, command(t, "", nil, args...))
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", extra, code, stdout, stderr)
		}
		r, err := result.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one := run()
	three := run("--local-agents", "3")

	for _, r := range []*result.Result{one, three} {
		if r.Status != result.Completed || r.Setup == nil || r.Setup.Users != 30 || r.Totals.Errors+r.Totals.Timeouts > 0 {
			t.Fatalf("status %q, setup %+v, totals %+v: want completed, 30 users set up, no failure", r.Status, r.Setup, r.Totals)
		}
		var inits int64
		for _, q := range r.Setup.Requests {
			if q.Name == "init" {
				inits += q.Count
			}
		}
		if inits != 1 {
			t.Errorf("init's request counted %d times, want once", inits)
		}
	}
	// 30 users thinking 100 ms: ~300 requests a second for 8 s in both.
	c1, c3 := float64(one.Totals.Count), float64(three.Totals.Count)
	if c1 < 1500 || math.Abs(c3-c1) > 0.15*c1 {
		t.Errorf("requests in the window: %v in one process, %v on three agents; want 1,500 or more, within 15%%", c1, c3)
	}
	for _, q := range three.Requests {
		if q.Name == "GET /healthz" && (q.P50Ms <= 0 || q.P99Ms < q.P50Ms || q.Count != three.Totals.Count) {
			t.Errorf("the agents' merged histogram: %+v", q)
		}
	}
	t.Logf("one process: %v requests; three agents: %v; notes %q", c1, c3, strings.Join(three.Notes, "; "))

	// Rows held one per user cannot be shared by agents yet: refused before traffic, saying where.
	if err := os.WriteFile(star, []byte(strings.Replace(agentScenario, `data.csv("names.csv")`, `data.csv("names.csv", pick="unique")`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, _, stderr := outcome(t, command(t, "", nil, "run", star, "--target", target, "--users", "3", "--local-agents", "2", "--out", filepath.Join(t.TempDir(), "u")))
	if code != 2 || !strings.Contains(stderr, `ping.star:2: a dataset with pick="unique" cannot be shared by agents yet`) {
		t.Errorf("pick=unique with agents: exit %d, want 2 and an error naming the line:\n%s", code, stderr)
	}
}
