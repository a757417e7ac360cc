// Package record records a browser session as a HAR file: it drives a
// headless Chromium over the DevTools protocol through a person's steps
// (visit a page, click, type, press a key, wait), hears the page's
// network events, asks for the bodies `headroom convert` reads, and
// writes what reached the server as HAR 1.2. It sends nothing off this
// machine unless asked: Chromium's requests to other hosts go to a proxy
// that refuses them. It knows nothing of scenarios (package har converts).
package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/headroom-dev/headroom/internal/browser"
)

// Options say what to record and within what bounds.
type Options struct {
	// Steps are the session, the first a visit.
	Steps []Step
	// Chromium is the browser to start; "": Debian's /usr/bin/chromium.
	Chromium string
	// Settle is how long the network must be quiet (no request in flight)
	// for a step to be done; 0: 500 ms.
	Settle time.Duration
	// StepTimeout bounds a step: a page to load, an element to appear, a
	// script to end, the network to settle; 0: 30 s.
	StepTimeout time.Duration
	// MaxDuration bounds the whole recording, Chromium's start included;
	// 0: 2 minutes.
	MaxDuration time.Duration
	// MaxRequests bounds the requests recorded (each hop of a redirect
	// counts); 0: 1,000.
	MaxRequests int
	// MaxBody bounds one body kept, in bytes; 0: 4 MiB, at most MaxBodyLimit.
	MaxBody int
	// AllowRemote lets the steps visit, and the page reach, other hosts.
	AllowRemote bool
	// Creator names the program in the HAR file.
	Creator Creator
	// Progress, if set, is told of each step as it is done, and of a step
	// that gave up waiting for the network to settle.
	Progress func(line string)
}

// Bounds of what a recording holds.
const (
	// MaxBodyLimit is the largest MaxBody: a body comes in one DevTools
	// message, within browser.MaxMessage even when escaped.
	MaxBodyLimit = 8 << 20
	// maxBodies bounds the bodies kept all together, so that a HAR file
	// stays within what `headroom convert` reads (har.MaxFile).
	maxBodies = 128 << 20
	// maxQueued bounds the events waiting to be read.
	maxQueued = 200_000
)

// Recording is a recorded session.
type Recording struct {
	File     File
	Cached   int      // requests the browser's cache answered: they never reached the server
	Failed   int      // requests that got no response (refused, blocked, canceled)
	Open     int      // requests still waiting for a response at the end
	Failures []string // the first failed ones, "GET URL: why"
	Logged   []string // what the page logged as faults (exceptions, console errors), a line each
}

// ErrNoChromium says Chromium is not where it was looked for.
var ErrNoChromium = errors.New("Chromium is not installed")

func (o Options) withDefaults() Options {
	if o.Chromium == "" {
		o.Chromium = browser.Bin
	}
	if o.Settle <= 0 {
		o.Settle = 500 * time.Millisecond
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = 30 * time.Second
	}
	if o.MaxDuration <= 0 {
		o.MaxDuration = 2 * time.Minute
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = 1000
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 4 << 20
	}
	o.MaxBody = min(o.MaxBody, MaxBodyLimit)
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// Check says whether the steps can be recorded: the first a visit, every
// visit an http(s) URL on this machine unless remote.
func Check(steps []Step, remote bool) error {
	_, err := resolve(steps, remote)
	return err
}

// Record starts Chromium, takes the steps and returns what the page sent
// and received. When a step fails or a bound is passed after the first
// page was opened, it returns the session so far with the error.
func Record(ctx context.Context, opt Options) (*Recording, error) {
	opt = opt.withDefaults()
	steps, err := resolve(opt.Steps, opt.AllowRemote)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(opt.Chromium); err != nil {
		return nil, fmt.Errorf("%w at %s: install it (apt-get install chromium) or give its path with --chromium", ErrNoChromium, opt.Chromium)
	}
	ctx, cancel := context.WithTimeout(ctx, opt.MaxDuration)
	defer cancel()
	dir, err := os.MkdirTemp("", "headroom-record-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var args []string
	if !opt.AllowRemote {
		// Every request to another host goes to a proxy that closes the
		// connection: it fails at once, and nothing leaves this machine.
		// Chromium never sends loopback through a proxy.
		refuse, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer refuse.Close()
		go func() {
			for {
				c, err := refuse.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		args = append(args, "--proxy-server=http://"+refuse.Addr().String())
	}
	q := &queue{signal: make(chan struct{}, 1)}
	b, err := browser.StartWith(ctx, browser.Options{Dir: dir, Bin: opt.Chromium, Args: args, Events: q.push})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", opt.Chromium, err)
	}
	defer b.Close()
	r := &recorder{ctx: ctx, b: b, q: q, opt: opt}
	if r.s, err = r.start(); err != nil {
		return nil, err
	}
	for i, st := range steps {
		if err = r.step(st); err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				err = fmt.Errorf("%s: the recording passed --max-duration %v", describe(st), opt.MaxDuration)
			}
			if i == 0 && len(r.s.entries) == 0 {
				return nil, err
			}
			break
		}
	}
	return r.recording(), err
}

// recorder takes the steps and keeps the session.
type recorder struct {
	ctx context.Context
	b   *browser.Browser
	q   *queue
	s   *session
	opt Options
}

// start finds the page's main frame and turns its network events on.
func (r *recorder) start() (*session, error) {
	raw, err := r.b.CallContext(r.ctx, "Page.getFrameTree", nil)
	if err != nil {
		return nil, err
	}
	var tree struct {
		FrameTree struct{ Frame struct{ ID string } }
	}
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, err
	}
	if _, err := r.b.CallContext(r.ctx, "Network.enable", map[string]any{"maxResourceBufferSize": r.opt.MaxBody + 1,
		"maxTotalBufferSize": maxBodies}); err != nil {
		return nil, err
	}
	return newSession(tree.FrameTree.Frame.ID, r.opt.MaxRequests, r.opt.MaxBody, maxBodies), nil
}

// step does one step and waits for the network to settle.
func (r *recorder) step(st Step) error {
	before := len(r.s.entries)
	var err error
	switch st.Verb {
	case "visit":
		err = r.visit(st.Arg)
	case "click":
		err = r.until(fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false;
			e.scrollIntoView({block: "center"}); e.focus(); e.click(); return true; })()`, jsString(st.Arg)),
			"no element matches it")
	case "type":
		err = r.typeText(st.Arg)
	case "press":
		err = r.press(st.Arg)
	case "eval":
		ctx, cancel := context.WithTimeout(r.ctx, r.opt.StepTimeout)
		err = r.b.EvalContext(ctx, st.Arg, nil)
		cancel()
	case "wait":
		err = r.wait(st.Wait)
	}
	if err == nil {
		err = r.settle()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", describe(st), err)
	}
	var title string
	if r.b.EvalContext(r.ctx, "document.title", &title) == nil {
		r.s.setTitle(title)
	}
	line := fmt.Sprintf("%s: %d requests", describe(st), len(r.s.entries)-before)
	if n := len(r.s.pages); n > 0 {
		line += fmt.Sprintf(", on page %d (%s)", n, orElse(r.s.pages[n-1].title, r.s.pages[n-1].url))
	}
	r.opt.Progress(line)
	return nil
}

func describe(st Step) string {
	arg := st.Arg
	if r := []rune(arg); len(r) > 60 {
		arg = string(r[:60]) + "…"
	}
	return strings.TrimSpace(st.Verb + " " + arg)
}

// visit opens url and waits for its load event.
func (r *recorder) visit(url string) error {
	raw, err := r.b.CallContext(r.ctx, "Page.navigate", map[string]any{"url": url})
	if err != nil {
		return err
	}
	var nav struct{ ErrorText string }
	json.Unmarshal(raw, &nav)
	switch {
	case nav.ErrorText == "net::ERR_CONNECTION_REFUSED":
		return errors.New("the page failed to load: connection refused (is the server up?)")
	case nav.ErrorText != "":
		return fmt.Errorf("the page failed to load: %s", nav.ErrorText)
	}
	return nil
}

// until runs script, which says whether it did its work, until it does,
// within the step's timeout.
func (r *recorder) until(script, never string) error {
	deadline := time.Now().Add(r.opt.StepTimeout)
	for {
		var done bool
		err := r.b.EvalContext(r.ctx, script, &done)
		if err == nil && done {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s within %v (--step-timeout): %v", never, r.opt.StepTimeout, err)
			}
			return fmt.Errorf("%s within %v (--step-timeout)", never, r.opt.StepTimeout)
		}
		if err := r.wait(100 * time.Millisecond); err != nil {
			return err
		}
	}
}

// typeText replaces what the focused field holds with text, as typed.
func (r *recorder) typeText(text string) error {
	if err := r.b.EvalContext(r.ctx, `(() => { const e = document.activeElement;
		if (!e || e === document.body) throw new Error("no field has the focus: click one first");
		if (typeof e.select === "function") e.select(); })()`, nil); err != nil {
		return err
	}
	if text == "" {
		return r.press("Backspace")
	}
	_, err := r.b.CallContext(r.ctx, "Input.insertText", map[string]any{"text": text})
	return err
}

// press presses and releases a key in the focused element.
func (r *recorder) press(key string) error {
	k := keys[key]
	for _, typ := range []string{"keyDown", "keyUp"} {
		p := map[string]any{"type": typ, "key": key, "code": k.code, "windowsVirtualKeyCode": k.vk, "nativeVirtualKeyCode": k.vk}
		if typ == "keyDown" && k.text != "" {
			p["text"] = k.text
		}
		if _, err := r.b.CallContext(r.ctx, "Input.dispatchKeyEvent", p); err != nil {
			return err
		}
	}
	return nil
}

// wait waits for d, taking the page's events as they come.
func (r *recorder) wait(d time.Duration) error {
	end := time.NewTimer(d)
	defer end.Stop()
	for {
		if _, err := r.drain(); err != nil {
			return err
		}
		select {
		case <-end.C:
			_, err := r.drain()
			return err
		case <-r.q.signal:
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
}

// settle waits until the page has loaded and no request has been in
// flight for Settle; past StepTimeout, a page that has not loaded is an
// error, a request still open (a long poll) is said and left.
func (r *recorder) settle() error {
	deadline := time.Now().Add(r.opt.StepTimeout)
	quiet := time.Now()
	for {
		busy, err := r.drain()
		if err != nil {
			return err
		}
		now := time.Now()
		if busy || r.s.inflight > 0 || !r.s.loaded {
			quiet = now
		}
		if now.Sub(quiet) >= r.opt.Settle {
			return nil
		}
		if now.After(deadline) {
			if !r.s.loaded {
				return fmt.Errorf("the page did not load within %v (--step-timeout)", r.opt.StepTimeout)
			}
			r.opt.Progress(fmt.Sprintf("still %d requests in flight after %v (a long poll?): going on", r.s.inflight, r.opt.StepTimeout))
			return nil
		}
		t := time.NewTimer(min(r.opt.Settle-now.Sub(quiet), time.Until(deadline)) + time.Millisecond)
		select {
		case <-t.C:
		case <-r.q.signal:
		case <-r.ctx.Done():
			t.Stop()
			return r.ctx.Err()
		}
		t.Stop()
	}
}

// drain takes the events that came, asking Chromium for the bodies the
// session wants; it says whether any was a network event.
func (r *recorder) drain() (busy bool, err error) {
	events, overflow := r.q.take()
	for _, ev := range events {
		busy = busy || strings.HasPrefix(ev.method, "Network.")
		a := r.s.handle(ev.method, ev.params)
		if a.e == nil {
			continue
		}
		if a.post {
			raw, err := r.b.CallContext(r.ctx, "Network.getRequestPostData", map[string]any{"requestId": a.e.id})
			var p struct{ PostData string }
			if err == nil && json.Unmarshal(raw, &p) == nil {
				r.s.setPostData(a.e, p.PostData)
			}
			continue
		}
		raw, err := r.b.CallContext(r.ctx, "Network.getResponseBody", map[string]any{"requestId": a.e.id})
		var body struct {
			Body          string
			Base64Encoded bool
		}
		if err == nil {
			err = json.Unmarshal(raw, &body)
		}
		if err != nil {
			if r.ctx.Err() != nil {
				return busy, r.ctx.Err()
			}
			a.e.note = "not kept: Chromium did not give it (" + err.Error() + ")"
			continue
		}
		r.s.setBody(a.e, body.Body, body.Base64Encoded)
	}
	switch {
	case overflow:
		return busy, fmt.Errorf("more than %d DevTools events waiting: the page is too busy to record", maxQueued)
	case r.s.full:
		return busy, fmt.Errorf("more than %d requests (--max-requests): the recording stops there", r.opt.MaxRequests)
	}
	return busy, nil
}

// recording is the session as a HAR file, and what was left out of it.
func (r *recorder) recording() *Recording {
	l, out := r.s.har(r.opt.Creator)
	rec := &Recording{File: File{Log: l}, Cached: out.cached, Failed: out.failed, Open: out.unanswered, Logged: r.b.Logs()}
	for _, e := range out.failures {
		why := e.failed
		if u, err := url.Parse(e.req.URL); err == nil && !r.opt.AllowRemote && !Loopback(u.Hostname()) {
			why = "another host, refused without leaving this machine (--allow-remote lets it through)"
		}
		rec.Failures = append(rec.Failures, e.req.Method+" "+e.req.URL+": "+why)
	}
	for i, l := range rec.Logged {
		rec.Logged[i], _, _ = strings.Cut(l, "\n") // a stack's first line
	}
	return rec
}

// queue holds the page's events from the DevTools reader until the
// recorder takes them; it never makes the reader wait.
type queue struct {
	mu       sync.Mutex
	events   []event
	overflow bool
	signal   chan struct{} // a token when events came
}

type event struct {
	method string
	params json.RawMessage
}

// push keeps the events the session reads.
func (q *queue) push(method string, params json.RawMessage) {
	if !strings.HasPrefix(method, "Network.") && method != "Page.loadEventFired" && method != "Page.domContentEventFired" {
		return
	}
	q.mu.Lock()
	if len(q.events) < maxQueued {
		q.events = append(q.events, event{method, params})
	} else {
		q.overflow = true
	}
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *queue) take() ([]event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ev := q.events
	q.events = nil
	return ev, q.overflow
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
