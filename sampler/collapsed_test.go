package sampler

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/headroom-dev/headroom/serverprof"
)

var pySpy = Collapsed{Period: 10 * time.Millisecond, Program: "/usr/bin/python3.11", Duration: 2 * time.Second}

// py-spy's raw output of a Python http.server hashing passwords (2 s at
// 100 Hz, --subprocesses): 47 samples, 39 of them in hash_password.
func TestParsePySpyRaw(t *testing.T) {
	b, err := os.ReadFile("testdata/py-spy-raw.txt")
	if err != nil {
		t.Fatal(err)
	}
	p, err := pySpy.Parse(b)
	if err != nil || p.Skipped != 0 || p.Cut != 0 {
		t.Fatalf("%v; skipped %d (%s), cut %d", err, p.Skipped, p.Why, p.Cut)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if got := p.SampleType[0].Type + "/" + p.SampleType[0].Unit + " " + p.SampleType[1].Type + "/" + p.SampleType[1].Unit; got != "samples/count cpu/nanoseconds" || p.Period != 1e7 {
		t.Errorf("sample types %s, period %d: want Go's samples/count, cpu/nanoseconds and 10 ms", got, p.Period)
	}
	var hash *profile.Sample
	var n int64
	for _, s := range p.Sample {
		n += s.Value[0]
		if s.Location[0].Line[0].Function.SystemName == "hash_password" {
			hash = s
		}
	}
	if n != 47 || hash == nil {
		t.Fatalf("%d samples, hash_password's %v: want 47, one stack with it at the leaf", n, hash)
	}
	leaf, root := hash.Location[0].Line[0], hash.Location[len(hash.Location)-1].Line[0]
	if leaf.Function.Name != "hash_password (srv.py)" || leaf.Function.Filename != "srv.py" || leaf.Line != 5 {
		t.Errorf("leaf %q in %q line %d: want hash_password (srv.py), srv.py, line 5", leaf.Function.Name, leaf.Function.Filename, leaf.Line)
	}
	if root.Function.Name != "process python3" || hash.NumLabel["pid"][0] != 4242 {
		t.Errorf("root %q, pid %v: want process python3 (no PID or arguments, which differ from run to run), pid 4242 as a label", root.Function.Name, hash.NumLabel)
	}
	if hash.Value[0] != 39 || hash.Value[1] != 390*int64(time.Millisecond) {
		t.Errorf("hash_password's values %v: want 39 samples, 390 ms", hash.Value)
	}
	if do := hash.Location[1].Line[0]; do.Function.Name != "H.do_GET (srv.py)" || do.Line != 9 {
		t.Errorf("its caller %q line %d: want H.do_GET (srv.py) line 9", do.Function.Name, do.Line)
	}
	// Through serverprof's reader, as compare reads a phase: the CPU, the
	// program, and hash_password spent most in itself.
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.pb.gz"), p.Profile)
	sum, err := serverprof.Read(dir, "p.pb.gz")
	if err != nil {
		t.Fatal(err)
	}
	top := serverprof.Func{}
	for _, f := range sum.Funcs {
		if f.Flat > top.Flat {
			top = f
		}
	}
	if sum.CPU != 470*time.Millisecond || sum.Binary != "python3.11" || top.Name != "hash_password (srv.py)" || top.Flat != 390*time.Millisecond {
		t.Errorf("read back: CPU %v of %q, top %+v: want 470ms of python3.11, hash_password (srv.py) 390ms", sum.CPU, sum.Binary, top)
	}
}

func write(t *testing.T, path string, p *profile.Profile) {
	t.Helper()
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// What the target names (its functions, files) and what a sampler prints
// is bounded: a line past MaxLine, garbage and bad counts are left out
// and said; a stack deeper than MaxDepth is cut from its root's side;
// names past MaxName are cut; functions past MaxFunctions are lumped;
// input past MaxInput is refused; a frame of odd shape is kept as a name.
func TestParseHostile(t *testing.T) {
	var in strings.Builder
	in.WriteString("main (a.py:1);work (a.py:2) 10\n")
	in.WriteString(strings.Repeat("x", MaxLine+1) + " 1\n") // too long
	in.WriteString("no count here\n")
	in.WriteString("main (a.py:1) -3\n")
	in.WriteString("main (a.py:1) 99999999999\n")
	in.WriteString("main (a.py:1) 1e3\n")
	in.WriteString(" 7\n")
	in.WriteString("\x00\xff\xfe garbage\n")
	in.WriteString("\n\r\n")
	var deep []string // 3,000 frames, root first: the leaf is f2999
	for i := range 3000 {
		deep = append(deep, fmt.Sprintf("f%d (deep.py:%d)", i, i))
	}
	in.WriteString(strings.Join(deep, ";") + " 2\n")
	in.WriteString(strings.Repeat("n", 5000) + " (" + strings.Repeat("f", 5000) + ".py:1) 1\n") // a long name and file
	in.WriteString("weird ((( (x.py:notaline);(;;) 1\n")
	p, err := pySpy.Parse([]byte(in.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if p.Skipped != 7 || !strings.Contains(p.Why, "line 2: ") {
		t.Errorf("skipped %d (first: %s): want 7, the first line 2 (too long)", p.Skipped, p.Why)
	}
	if len(p.Sample) != 4 {
		t.Errorf("%d samples: want 4 (main, deep, long, weird)", len(p.Sample))
	}
	for _, s := range p.Sample {
		if s.Location[0].Line[0].Function.SystemName == "f2999" {
			if len(s.Location) != serverprof.MaxDepth || s.Location[len(s.Location)-1].Line[0].Function.SystemName != fmt.Sprintf("f%d", 3000-serverprof.MaxDepth) {
				t.Errorf("the deep stack: %d frames: want %d from the leaf", len(s.Location), serverprof.MaxDepth)
			}
		}
		for _, l := range s.Location {
			if fn := l.Line[0].Function; len(fn.SystemName) > serverprof.MaxName+3 || len(fn.Filename) > serverprof.MaxName+3 {
				t.Errorf("a name of %d bytes, a file of %d: want at most %d", len(fn.SystemName), len(fn.Filename), serverprof.MaxName)
			}
		}
	}
	if p.Cut != 1 {
		t.Errorf("cut %d: want 1", p.Cut)
	}
	if _, err := pySpy.Parse(make([]byte, MaxInput+1)); err == nil {
		t.Error("more than MaxInput: want refused")
	}
	if _, err := (Collapsed{}).Parse([]byte("a 1\n")); err == nil {
		t.Error("no period: want an error")
	}
}

// Past MaxFunctions distinct functions a new one is "[more functions]";
// past MaxStacks lines the rest are left out.
func TestParseBoundsFunctionsAndStacks(t *testing.T) {
	var in strings.Builder
	for i := range MaxStacks + 10 {
		fmt.Fprintf(&in, "main (m.py:1);fn%d (m.py:2) 1\n", i)
	}
	p, err := pySpy.Parse([]byte(in.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Function) != MaxFunctions+1 || p.Function[len(p.Function)-1].Name != moreFunctions {
		t.Errorf("%d functions, the last %q: want %d and %q", len(p.Function), p.Function[len(p.Function)-1].Name, MaxFunctions+1, moreFunctions)
	}
	if len(p.Sample) != MaxStacks || p.Skipped != 10 {
		t.Errorf("%d stacks, %d skipped: want %d and 10", len(p.Sample), p.Skipped, MaxStacks)
	}
}

// perf script's samples, folded: root first under a process frame, each
// sample one count, the period perf gave.
func TestFoldPerfScript(t *testing.T) {
	in := `nginx 812   10101010 
	          4a1b2c ngx_http_process_request_line (/usr/sbin/nginx)
	          4a0000 ngx_epoll_process_events (/usr/sbin/nginx)
	          410000 main (/usr/sbin/nginx)

nginx 812   10101010 
	          4a1b2c ngx_http_process_request_line (/usr/sbin/nginx)
	          4a0000 ngx_epoll_process_events (/usr/sbin/nginx)
	          410000 main (/usr/sbin/nginx)

nginx worker 813   10101010 
	          15592f __strcmp_avx2 (/usr/lib/x86_64-linux-gnu/libc.so.6)
	    55ff593fa8c8 [unknown] ([unknown])
	          7fe0 std::vector<int>::push_back(int const&) (/usr/lib/libfoo;x.so)
`
	folded, period, skipped := Fold([]byte(in))
	want := `process 812:"nginx";main (nginx);ngx_epoll_process_events (nginx);ngx_http_process_request_line (nginx) 2
process 813:"nginx worker";std::vector<int>::push_back(int const&) (libfoo:x.so);[unknown];__strcmp_avx2 (libc.so.6) 1
`
	if string(folded) != want || period != 10101010 || skipped != 0 {
		t.Errorf("folded:\n%s\nperiod %v, skipped %d; want:\n%s\nperiod 10.10101ms", folded, period, skipped, want)
	}
	p, err := Collapsed{Period: period}.Parse(folded)
	if err != nil || len(p.Sample) != 2 || p.Sample[0].Value[1] != 2*10101010 || p.Sample[0].Location[0].Line[0].Function.Name != "ngx_http_process_request_line (nginx)" {
		t.Errorf("%v: %d samples, the first %v", err, len(p.Sample), p.Sample[0].Value)
	}
	b, err := os.ReadFile("testdata/perf-script.txt") // a shell's busy loop, its symbols mostly unknown
	if err != nil {
		t.Fatal(err)
	}
	folded, _, _ = Fold(b)
	if p, err := (Collapsed{Period: period}.Parse(folded)); err != nil || p.Skipped != 0 || len(p.Sample) == 0 {
		t.Errorf("testdata/perf-script.txt: %v, %d stacks, %d skipped", err, len(p.Sample), p.Skipped)
	}
}
