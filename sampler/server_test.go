package sampler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// fakeSampler returns a profile of one stack, or err; with hold set it
// waits for it to close first.
type fakeSampler struct {
	hold  chan struct{}
	err   error
	calls chan time.Duration
}

func (f fakeSampler) Sample(ctx context.Context, pid int, d time.Duration) (Parsed, error) {
	if f.calls != nil {
		f.calls <- d
	}
	if f.hold != nil {
		<-f.hold
	}
	if f.err != nil {
		return Parsed{}, f.err
	}
	return pySpy.Parse([]byte("main (app.py:1);work (app.py:2) 10\n"))
}

// fakeProc is a proc file system of the given processes: pid, parent,
// comm and command line.
func fakeProc(t *testing.T, procs ...[4]string) Proc {
	t.Helper()
	root := t.TempDir()
	for _, p := range procs {
		dir := filepath.Join(root, p[0])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := fmt.Sprintf("%s (%s) S %s 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n", p[0], p[2], p[1]) // as the kernel writes it: starttime the 22nd field
		_ = os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.ReplaceAll(p[3], " ", "\x00")+"\x00"), 0o644)
	}
	return Proc{Root: root}
}

func get(t *testing.T, h http.Handler, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, w.Result().Header, string(b)
}

// The endpoint answers as Go's pprof does where --profile reads it: a
// gzipped CPU profile over ?seconds, the seconds bounded, no heap (404),
// and a process gone or a sampler that failed a 503 with the reason,
// after which it goes on serving.
func TestServerAnswers(t *testing.T) {
	proc := fakeProc(t, [4]string{"42", "1", "python3", "python3 app.py"})
	calls := make(chan time.Duration, 10)
	s := &Server{Target: Target{PID: 42}, Proc: proc, Sampler: fakeSampler{calls: calls}}
	h := s.Handler()
	code, hdr, body := get(t, h, "/debug/pprof/profile?seconds=3")
	if code != 200 || hdr.Get("Content-Type") != "application/octet-stream" || <-calls != 3*time.Second {
		t.Fatalf("status %d %q: want 200, a profile of 3 s", code, body)
	}
	p, err := profile.ParseData([]byte(body))
	if err != nil || len(p.Sample) != 1 || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Fatalf("%v, %d samples: want one, gzipped", err, len(p.Sample))
	}
	for _, q := range []string{"0", "61", "-1", "abc", "1e3", "99999999999999999999"} {
		if code, _, body := get(t, h, "/debug/pprof/profile?seconds="+q); code != 400 || !strings.Contains(body, "want 1 to 60") {
			t.Errorf("seconds=%s: %d %q: want 400, 1 to 60", q, code, body)
		}
	}
	if code, _, _ := get(t, h, "/debug/pprof/profile"); code != 200 || <-calls != DefaultSeconds*time.Second {
		t.Errorf("no seconds: %d: want 200 over %d s, as Go's", code, DefaultSeconds)
	}
	if code, _, _ := get(t, h, "/debug/pprof/heap"); code != 404 {
		t.Errorf("heap: %d: want 404", code)
	}
	s.Target = Target{PID: 43} // no such process
	if code, _, body := get(t, h, "/debug/pprof/profile?seconds=1"); code != 503 || !strings.Contains(body, "process 43: no such process") {
		t.Errorf("process gone: %d %q: want 503 saying so", code, body)
	}
	s.Target, s.Sampler = Target{Name: "app.py"}, fakeSampler{err: fmt.Errorf("py-spy %w (py-spy): install it: %s", ErrNoSampler, PySpyInstall)}
	if code, _, body := get(t, h, "/debug/pprof/profile?seconds=1"); code != 503 || !strings.Contains(body, "pip install py-spy==0.4.3") {
		t.Errorf("no py-spy: %d %q: want 503 saying how to install it", code, body)
	}
	s.Sampler = fakeSampler{}
	if code, _, body := get(t, h, "/debug/pprof/profile?seconds=1"); code != 200 {
		t.Errorf("after the failures, by name: %d %q: want 200", code, body)
	}
}

// One profile at a time: a request while one is taken is answered 429
// at once, with Retry-After; the next after it is served.
func TestServerOneAtATime(t *testing.T) {
	hold := make(chan struct{})
	calls := make(chan time.Duration, 2)
	s := &Server{Target: Target{PID: 42}, Proc: fakeProc(t, [4]string{"42", "1", "python3", "python3"}), Sampler: fakeSampler{hold: hold, calls: calls}}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	first := make(chan int)
	go func() {
		resp, err := http.Get(srv.URL + "/debug/pprof/profile?seconds=10")
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-calls // the first is being taken
	resp, err := http.Get(srv.URL + "/debug/pprof/profile?seconds=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != 429 || ra < 1 || ra > 10 {
		t.Errorf("a second request: %d, Retry-After %q: want 429 and 1 to 10 s", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(hold)
	if code := <-first; code != 200 {
		t.Errorf("the first: %d: want 200", code)
	}
	if code, _, _ := get(t, s.Handler(), "/debug/pprof/profile?seconds=1"); code != 200 {
		t.Errorf("after it: %d: want 200", code)
	}
}

// With a token every request carries it, as a Bearer token or a Basic
// password (a --profile URL's user:TOKEN@); others are 401.
func TestServerToken(t *testing.T) {
	s := &Server{Target: Target{PID: 42}, Proc: fakeProc(t, [4]string{"42", "1", "python3", "python3"}), Sampler: fakeSampler{}, Token: []byte("0123456789abcdef-secret")}
	h := s.Handler()
	for _, c := range []struct {
		hdr  []string
		code int
	}{
		{nil, 401},
		{[]string{"Authorization", "Bearer wrong"}, 401},
		{[]string{"Authorization", "Bearer 0123456789abcdef-secre"}, 401},
		{[]string{"Authorization", "Bearer 0123456789abcdef-secret"}, 200},
		{[]string{"Authorization", "Basic aGVhZHJvb206MDEyMzQ1Njc4OWFiY2RlZi1zZWNyZXQ="}, 200}, // headroom:0123456789abcdef-secret
	} {
		if code, _, _ := get(t, h, "/debug/pprof/profile?seconds=1", c.hdr...); code != c.code {
			t.Errorf("%v: %d, want %d", c.hdr, code, c.code)
		}
	}
	if code, _, _ := get(t, h, "/debug/pprof/heap"); code != 401 {
		t.Errorf("heap without the token: %d, want 401", code)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:6060": true, "127.8.0.1:1": true, "[::1]:6060": true, "localhost:6060": true,
		":6060": false, "0.0.0.0:6060": false, "10.0.0.1:6060": false, "[::]:6060": false, "example.com:80": false, "127.0.0.1": false} {
		if Loopback(addr) != want {
			t.Errorf("Loopback(%q) = %v", addr, !want)
		}
	}
}

// --name finds the process whose command name or a command-line word's
// file name it is, the parent of the matching ones (gunicorn's master,
// not its workers); two unrelated matches are an error naming both.
func TestNamed(t *testing.T) {
	pr := fakeProc(t,
		[4]string{"10", "1", "gunicorn", "/venv/bin/python3 /venv/bin/gunicorn app:wsgi"},
		[4]string{"11", "10", "gunicorn", "/venv/bin/python3 /venv/bin/gunicorn app:wsgi"},
		[4]string{"12", "10", "gunicorn", "/venv/bin/python3 /venv/bin/gunicorn app:wsgi"},
		[4]string{"20", "1", "python3", "python3 server.py 8080"},
		[4]string{"30", "1", "python3", "python3 other.py"},
	)
	for name, want := range map[string]string{"gunicorn": "10", "server.py": "20", "nginx": "no process named", "python3": "3 processes are named"} {
		pid, err := pr.Named(name, 1)
		if !strings.Contains(fmt.Sprint(pid)+" "+fmt.Sprint(err), want) {
			t.Errorf("Named(%q) = %d, %v: want %s", name, pid, err, want)
		}
	}
	if tree := fmt.Sprint(pr.Tree(10)); tree != "[10 11 12]" {
		t.Errorf("Tree(10) = %s: want [10 11 12]", tree)
	}
}

// PySpy runs py-spy with the flags of 0.4.3 and reads its raw output; its
// failures become errors callers branch on, without its backtrace.
func TestPySpyCommand(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "py-spy")
	script := `#!/bin/sh
echo "$@" > "` + dir + `/args"
case "$FAKE" in
perm) printf 'Error: Failed to open process\n\nCaused by:\n    0: Permission denied (os error 13)\n\nStack backtrace:\n   0: x\n' >&2; exit 1;;
notpy) printf 'Error: Failed to find python version from target process\n\nStack backtrace:\n   0: x\n' >&2; exit 1;;
esac
while [ $# -gt 0 ]; do [ "$1" = --output ] && printf 'main (a.py:1);work (a.py:2) 7\n' > "$2"; shift; done
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := PySpy{Path: fake, Proc: Proc{}}
	self := os.Getpid()
	p, err := s.Sample(context.Background(), self, 2*time.Second)
	if err != nil || len(p.Sample) != 1 || p.Sample[0].Value[1] != 70e6 {
		t.Fatalf("%v, %d samples: want one of 70 ms", err, len(p.Sample))
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	want := fmt.Sprintf("record --pid %d --duration 2 --rate 100 --format raw --output ", self)
	if !strings.HasPrefix(string(args), want) || !strings.HasSuffix(strings.TrimSpace(string(args)), "--subprocesses --nonblocking") {
		t.Errorf("py-spy %s: want %s... --subprocesses --nonblocking", args, want)
	}
	t.Setenv("FAKE", "perm")
	if _, err := s.Sample(context.Background(), self, time.Second); !errIs(err, ErrPermission) || !strings.Contains(err.Error(), "ptrace_scope") || strings.Contains(err.Error(), "backtrace") {
		t.Errorf("permission denied: %v: want ErrPermission, saying how, without the backtrace", err)
	}
	t.Setenv("FAKE", "notpy")
	if _, err := s.Sample(context.Background(), self, time.Second); !errIs(err, ErrNotPython) || !strings.Contains(err.Error(), "--sampler perf") {
		t.Errorf("not Python: %v: want ErrNotPython, pointing to perf", err)
	}
	if _, err := s.Sample(context.Background(), 1<<30, time.Second); !errIs(err, ErrGone) {
		t.Errorf("no such process: %v: want ErrGone", err)
	}
	if _, err := (PySpy{Path: filepath.Join(dir, "none")}).Sample(context.Background(), self, time.Second); !errIs(err, ErrNoSampler) || !strings.Contains(err.Error(), "pip install py-spy==0.4.3") {
		t.Errorf("no py-spy: %v: want ErrNoSampler, saying how to install it", err)
	}
}

func errIs(err, target error) bool { return err != nil && errors.Is(err, target) }

// cpuSampler returns 100 samples of 10 ms (1 s of CPU, as py-spy claims
// it), and while it samples the kernel counts ticks more CPU for process
// 42 and its worker 43 (half each), written into the fake proc's stat.
type cpuSampler struct {
	root  string
	ticks int
}

func (c cpuSampler) Sample(ctx context.Context, pid int, d time.Duration) (Parsed, error) {
	for _, p := range [][3]string{{"42", "1", "python3"}, {"43", "42", "python3"}} {
		stat := fmt.Sprintf("%s (%s) S %s 1 1 0 -1 0 0 0 0 0 %d 0 0 0 20 0 1 0 100 0 0\n", p[0], p[2], p[1], c.ticks/2)
		if err := os.WriteFile(filepath.Join(c.root, p[0], "stat"), []byte(stat), 0o644); err != nil {
			return Parsed{}, err
		}
	}
	return pySpy.Parse([]byte("main (app.py:1);hash (app.py:2) 75\nmain (app.py:1);reply (app.py:3) 25\n"))
}

// A profile whose samples claim more CPU than the kernel counted for the
// process and its children (py-spy counts threads waiting for the GIL or
// a core as running) is scaled to the kernel's count, each function
// keeping its share; one within it is served as sampled.
func TestProfilesScaledToTheKernelsCPU(t *testing.T) {
	for _, c := range []struct {
		ticks int
		want  time.Duration // the profile's CPU
	}{{40, 400 * time.Millisecond}, {100, time.Second}, {200, time.Second}} {
		proc := fakeProc(t, [4]string{"42", "1", "python3", "gunicorn app"}, [4]string{"43", "42", "python3", "gunicorn app"})
		var logged []string
		s := &Server{Target: Target{PID: 42}, Proc: proc, Sampler: cpuSampler{root: proc.Root, ticks: c.ticks}, Log: func(m string) { logged = append(logged, m) }}
		code, _, body := get(t, s.Handler(), "/debug/pprof/profile?seconds=1")
		if code != 200 {
			t.Fatalf("%d ticks: %d %s", c.ticks, code, body)
		}
		p, err := profile.Parse(strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var total, hash time.Duration
		for _, smp := range p.Sample {
			total += time.Duration(smp.Value[1])
			if smp.Location[0].Line[0].Function.Name == "hash (app.py)" {
				hash += time.Duration(smp.Value[1])
			}
		}
		if total != c.want || hash != c.want*3/4 {
			t.Errorf("the kernel counted %d ticks: the profile holds %v, hash %v; want %v, three quarters hash (logged %q)", c.ticks, total, hash, c.want, logged)
		}
		if scaled := strings.Contains(strings.Join(logged, "\n"), "scaled to it"); scaled != (c.ticks == 40) {
			t.Errorf("the kernel counted %d ticks: log %q; want it to say it scaled only when the samples claimed more", c.ticks, logged)
		}
	}
}
