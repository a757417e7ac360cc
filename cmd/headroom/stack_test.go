//go:build linux

package main

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// headroom runs itself again with GODEBUG=adaptivestackstart=0 (see
// fixedStackStart): the process, once up, has it in its environment once,
// beside what the user set, and a user's own adaptivestackstart is kept.
func TestFixedStackStart(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"", "adaptivestackstart=0"},
		{"madvdontneed=1", "madvdontneed=1,adaptivestackstart=0"},
		{"adaptivestackstart=1", "adaptivestackstart=1"},
	} {
		cmd := command(t, "", []string{"GODEBUG=" + c.set}, "testbed", "--listen", "127.0.0.1:0")
		out, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		said := make(chan string, 1)
		go func() { line, _ := bufio.NewReader(out).ReadString('\n'); said <- line }()
		var line string
		select {
		case line = <-said: // the testbed is up
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("GODEBUG=%s: the testbed said nothing in 30 s", c.set)
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/environ")
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil {
			t.Fatalf("GODEBUG=%s: %v (testbed said %q)", c.set, err, line)
		}
		var got []string
		for _, kv := range strings.Split(string(b), "\x00") {
			if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
				got = append(got, v)
			}
		}
		if !slices.Equal(got, []string{c.want}) {
			t.Errorf("started with GODEBUG=%s: the running headroom has %q, want [%s]", c.set, got, c.want)
		}
	}
}
