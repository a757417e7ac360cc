package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-dev/headroom/result"
)

func TestSourceAddrsParse(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.2":                        "[127.0.0.2]",
		"127.0.0.1-127.0.0.3":              "[127.0.0.1 127.0.0.2 127.0.0.3]",
		" 127.0.0.9 , 127.0.1.1-127.0.1.2": "[127.0.0.9 127.0.1.1 127.0.1.2]",
		"127.0.0.255-127.0.1.0":            "[127.0.0.255 127.0.1.0]",
	} {
		var s sourceAddrs
		if err := s.Set(in); err != nil || fmt.Sprint(s.addrs) != want {
			t.Errorf("%q: %v %v, want %s", in, s.addrs, err, want)
		}
	}
	for _, in := range []string{"", "localhost", "127.0.0.5-127.0.0.1", "127.0.0.1-::1", "10.0.0.0-10.255.255.255"} {
		var s sourceAddrs
		if err := s.Set(in); err == nil {
			t.Errorf("%q accepted: %v", in, s.addrs)
		}
	}
}

// TestSourceAddrsAreCheckedBeforeTraffic: an address this machine does
// not have, or of the wrong family, is a usage error naming it.
func TestSourceAddrsAreCheckedBeforeTraffic(t *testing.T) {
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def a(user):\n    pass\nactions = [action('A', a)]\n")
	for addrs, want := range map[string]string{
		"192.0.2.7": "cannot connect from 192.0.2.7", // TEST-NET-1: on no machine
		"::1":       "the target 127.0.0.1:1 is IPv4",
	} {
		code, _, stderr := headroom(t, "run", sc, "--target", "http://127.0.0.1:1", "--source-addrs", addrs, "--out", filepath.Join(dir, "o"))
		if code != ExitUsage || !strings.Contains(stderr, want) {
			t.Errorf("--source-addrs %s: exit %d, want %d with %q:\n%s", addrs, code, ExitUsage, want, stderr)
		}
	}
}

// TestPortsWarning: more users than one source address holds to one
// target is warned about with the addresses that would hold them; given
// them, no warning.
func TestPortsWarning(t *testing.T) {
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def a(user):\n    pass\nactions = [action('A', a)]\n")
	run := func(args ...string) string {
		e := Env{Args: append([]string{"run", sc, "--target", "http://127.0.0.1:1", "--out", filepath.Join(dir, "o")}, args...),
			Stdout: &strings.Builder{}, Stderr: &strings.Builder{}, Limits: func() Limits { return Limits{Ports: 100} }}
		Main(context.Background(), e) // the target is down: it stops there
		return e.Stderr.(*strings.Builder).String()
	}
	if w := run("--users", "120"); !strings.Contains(w, "--users 120 needs 120 connections to 127.0.0.1:1, but one source address holds about 50") ||
		!strings.Contains(w, "--source-addrs 127.0.0.1-127.0.0.3") || !strings.Contains(w, "past 100 they fail") {
		t.Errorf("120 users, 100 ports:\n%s", w)
	}
	if w := run("--users", "120", "--source-addrs", "127.0.0.1-127.0.0.3"); strings.Contains(w, "warning") {
		t.Errorf("120 users from 3 addresses of 100 ports warned:\n%s", w)
	}
	if w := run("--users", "50"); strings.Contains(w, "warning") {
		t.Errorf("50 users warned:\n%s", w)
	}
}

// TestSourceAddrsAndMaxBodyReachTheTarget: users connect from the given
// addresses in turn, and a body past --max-body is an error.
func TestSourceAddrsAndMaxBodyReachTheTarget(t *testing.T) {
	var mu sync.Mutex
	from := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ap, _ := netip.ParseAddrPort(r.RemoteAddr)
		mu.Lock()
		from[ap.Addr().String()] = true
		mu.Unlock()
		if r.URL.Path == "/big" {
			w.Write(make([]byte, 4096))
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def a(user):\n    user.http.get('/small')\n    user.http.get('/big')\nactions = [action('A', a)]\nthink_time = think.constant('20ms')\n")
	out := filepath.Join(dir, "o")
	code, _, stderr := headroom(t, "run", sc, "--target", srv.URL, "--users", "3", "--duration", "1s", "--quiet", "--no-report",
		"--source-addrs", "127.0.0.2-127.0.0.4", "--max-body", "1KiB", "--out", out)
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	mu.Lock()
	if len(from) != 3 || !from["127.0.0.2"] || !from["127.0.0.3"] || !from["127.0.0.4"] {
		t.Errorf("connections came from %v, want the three source addresses", from)
	}
	mu.Unlock()
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Requests {
		switch {
		case r.Name == "GET /big" && (r.Errors != r.Count || r.Count == 0):
			t.Errorf("GET /big of 4 KiB with --max-body 1KiB: %d errors of %d", r.Errors, r.Count)
		case r.Name == "GET /small" && r.Errors != 0:
			t.Errorf("GET /small: %d errors", r.Errors)
		}
	}
}

// TestMaxStepsReachesTheScenario: a runaway loop in an action fails at
// --max-steps, not at the default.
func TestMaxStepsReachesTheScenario(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	sc := write(t, dir, "s.star", "def a(user):\n    n = 0\n    for i in range(100000):\n        n += i\n    user.http.get('/')\nactions = [action('A', a)]\nthink_time = think.constant('20ms')\n")
	out := filepath.Join(dir, "o")
	code, _, stderr := headroom(t, "run", sc, "--target", srv.URL, "--users", "1", "--duration", "1s", "--quiet", "--no-report", "--max-steps", "10000", "--out", out)
	if code != ExitNothing {
		t.Errorf("every action stopped by --max-steps 10000: exit %d, want %d\n%s", code, ExitNothing, stderr)
	}
	res, err := result.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	msgs := fmt.Sprint(res.Actions)
	if !strings.Contains(msgs, "10000 Starlark steps") {
		t.Errorf("actions %s, want the step limit named", msgs)
	}
}
