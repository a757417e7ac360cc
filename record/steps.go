package record

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"
)

// A Step is one thing the recording's person does; after each, the
// recording waits until the network is quiet.
type Step struct {
	Verb string        // visit, click, type, press, eval, wait
	Arg  string        // the URL, selector, text, key or script
	Wait time.Duration // wait's
}

// Verbs are the steps a session is made of, with what each takes.
var Verbs = []struct{ Name, Arg, Does string }{
	{"visit", "URL", "open a page (a path is taken from the first page's origin)"},
	{"click", "SELECTOR", "click the first element the CSS selector matches, once one does"},
	{"type", "TEXT", "type text into the focused field, replacing what it holds (click it first)"},
	{"press", "KEY", "press a key in the focused element: Enter, Tab, Escape, Backspace, ArrowDown, ArrowUp"},
	{"eval", "SCRIPT", "run JavaScript in the page (awaited if it returns a promise)"},
	{"wait", "DURATION", "wait (as a person reads), recording what the page does meanwhile"},
}

// keys are the keys press knows: DevTools' key, code, key code, text.
var keys = map[string]struct {
	code string
	vk   int
	text string
}{
	"Enter": {"Enter", 13, "\r"}, "Tab": {"Tab", 9, ""}, "Escape": {"Escape", 27, ""}, "Backspace": {"Backspace", 8, ""},
	"ArrowDown": {"ArrowDown", 40, ""}, "ArrowUp": {"ArrowUp", 38, ""},
}

// ParseStep makes a step of a verb and its argument.
func ParseStep(verb, arg string) (Step, error) {
	s := Step{Verb: verb, Arg: arg}
	known := false
	for _, v := range Verbs {
		known = known || v.Name == verb
	}
	switch {
	case !known:
		var names []string
		for _, v := range Verbs {
			names = append(names, v.Name)
		}
		return s, fmt.Errorf("%q is no step: the steps are %s", verb, strings.Join(names, ", "))
	case arg == "" && verb != "type":
		return s, fmt.Errorf("%s needs its %s", verb, argOf(verb))
	case verb == "wait":
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("wait %q: want a duration such as 2s or 500ms", arg)
		}
		s.Wait = d
	case verb == "press":
		if _, ok := keys[arg]; !ok {
			return s, fmt.Errorf("press %q: the keys are Enter, Tab, Escape, Backspace, ArrowDown, ArrowUp", arg)
		}
	}
	return s, nil
}

func argOf(verb string) string {
	for _, v := range Verbs {
		if v.Name == verb {
			return v.Arg
		}
	}
	return ""
}

// ParseSteps reads steps, one a line ("click #execute"), from a file
// named name: blank lines and lines starting with # are skipped. At most
// 1,000 steps of 64 KiB each.
func ParseSteps(r io.Reader, name string) ([]Step, error) {
	var steps []Step
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(steps) == 1000 {
			return nil, fmt.Errorf("%s:%d: more than 1000 steps", name, n)
		}
		verb, arg, _ := strings.Cut(line, " ")
		s, err := ParseStep(verb, strings.TrimSpace(arg))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		steps = append(steps, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return steps, nil
}

// resolve makes every visit's URL absolute, from the first page's origin,
// and refuses one that is not http(s) or, unless remote, not on this
// machine.
func resolve(steps []Step, remote bool) ([]Step, error) {
	if len(steps) == 0 || steps[0].Verb != "visit" {
		return nil, fmt.Errorf("the first step opens a page: give its URL (headroom record http://127.0.0.1:9090/)")
	}
	var base *url.URL
	out := make([]Step, len(steps))
	for i, s := range steps {
		out[i] = s
		if s.Verb != "visit" {
			continue
		}
		u, err := url.Parse(s.Arg)
		if err == nil && base != nil {
			u = base.ResolveReference(u)
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("visit %q: not an http(s) URL", s.Arg)
		}
		if !remote && !Loopback(u.Hostname()) {
			return nil, fmt.Errorf("visit %s: %s is not this machine; headroom records and sends traffic on loopback only (127.0.0.1, ::1, localhost) unless --allow-remote", u, u.Hostname())
		}
		if base == nil {
			base = u
		}
		out[i].Arg = u.String()
	}
	return out, nil
}

// Loopback says whether host (a name or an address, without a port) is
// this machine: localhost, 127.0.0.0/8 or ::1.
func Loopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
