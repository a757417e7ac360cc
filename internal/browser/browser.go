// Package browser drives a real headless Chromium over the DevTools
// protocol: for the tests that watch a page as a person would (the live
// view's: open a URL, read the page with a script, take a screenshot,
// hear what the page logged), and for `headroom record`, which hears the
// page's network events (Options.Events) and asks for their bodies.
// Debian's chromium is the one scripts/test.sh installs.
package browser

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Bin is Debian's chromium.
const Bin = "/usr/bin/chromium"

// MaxMessage bounds one DevTools message headroom reads (a response body
// asked for with Network.getResponseBody is one): past it the connection
// is closed and every call fails.
const MaxMessage = 64 << 20

// callTimeout bounds a call made with Call.
const callTimeout = 60 * time.Second

// Options say how to start Chromium.
type Options struct {
	// Dir holds Chromium's profile and home; it must exist.
	Dir string
	// Bin is the Chromium to start; "": Bin.
	Bin string
	// Args are flags added to the defaults (a proxy, say).
	Args []string
	// Events, if set, is called with every event of the page, in order,
	// on the goroutine that reads the DevTools connection: it must return
	// at once and call nothing on the Browser (a call would wait for that
	// same goroutine). params is valid after it returns.
	Events func(method string, params json.RawMessage)
}

// Browser is one headless Chromium with one page. Its methods may be
// called from several goroutines.
type Browser struct {
	cmd    *exec.Cmd
	ws     *websocket.Conn
	events func(method string, params json.RawMessage)
	done   chan struct{} // closed when the reader ends

	wmu sync.Mutex // one write at a time

	mu      sync.Mutex
	id      int
	pending map[int]chan reply
	err     error    // why the connection ended; set once
	logs    []string // what the page logged: exceptions, console and log entries of level error
}

type reply struct {
	result json.RawMessage
	err    error
}

// Start starts Chromium with its own profile in dir, and its page.
func Start(ctx context.Context, dir string) (*Browser, error) {
	return StartWith(ctx, Options{Dir: dir})
}

// StartWith starts Chromium as opt says, and its page.
func StartWith(ctx context.Context, opt Options) (*Browser, error) {
	bin := opt.Bin
	if bin == "" {
		bin = Bin
	}
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--no-default-browser-check", "--hide-scrollbars", "--mute-audio", "--window-size=1200,1600",
		"--user-data-dir=" + filepath.Join(opt.Dir, "profile"), "--remote-debugging-port=0"}, opt.Args...)
	cmd := exec.CommandContext(ctx, bin, append(args, "about:blank")...)
	cmd.Env = append(os.Environ(), "HOME="+opt.Dir, "XDG_CONFIG_HOME="+opt.Dir, "XDG_CACHE_HOME="+opt.Dir)
	ownGroup(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &Browser{cmd: cmd, events: opt.Events, pending: map[int]chan reply{}, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() { // the DevTools address, then the rest of the log drained
		re := regexp.MustCompile(`DevTools listening on (ws://\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var addr string
	select {
	case addr = <-found:
	case <-time.After(time.Minute):
		b.Close()
		return nil, errors.New("chromium did not say where its DevTools listen within a minute")
	case <-ctx.Done():
		b.Close()
		return nil, ctx.Err()
	}
	if err := b.attach(ctx, addr); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// attach connects to the page's DevTools and turns its logs on.
func (b *Browser) attach(ctx context.Context, browserWS string) error {
	host := strings.TrimPrefix(browserWS, "ws://")
	host = host[:strings.Index(host, "/")]
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+host+"/json/list", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var targets []struct{ Type, WebSocketDebuggerURL string }
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&targets); err != nil {
		return err
	}
	for _, t := range targets {
		if t.Type == "page" {
			if b.ws, _, err = websocket.DefaultDialer.DialContext(ctx, t.WebSocketDebuggerURL, nil); err != nil {
				return err
			}
			b.ws.SetReadLimit(MaxMessage)
			go b.read()
			for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
				if _, err := b.CallContext(ctx, m, nil); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return errors.New("chromium has no page")
}

// read reads the connection until it ends: each reply to its call, each
// event to the logs and to Options.Events.
func (b *Browser) read() {
	defer close(b.done)
	for {
		var m struct {
			ID     int
			Method string
			Params json.RawMessage
			Result json.RawMessage
			Error  *struct{ Message string }
		}
		if err := b.ws.ReadJSON(&m); err != nil {
			b.mu.Lock()
			b.err = fmt.Errorf("chromium's DevTools connection: %w", err)
			for id, ch := range b.pending {
				ch <- reply{err: b.err}
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		if m.Method != "" {
			b.event(m.Method, m.Params)
			if b.events != nil {
				b.events(m.Method, m.Params)
			}
			continue
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch == nil {
			continue // a call given up on
		}
		if m.Error != nil {
			ch <- reply{err: errors.New(m.Error.Message)}
		} else {
			ch <- reply{result: m.Result}
		}
	}
}

// Call calls a DevTools method and returns its result, within a minute.
func (b *Browser) Call(method string, params any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	return b.CallContext(ctx, method, params)
}

// CallContext calls a DevTools method and returns its result, or ctx's
// error once ctx is done.
func (b *Browser) CallContext(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan reply, 1)
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", method, b.err)
	}
	b.id++
	id := b.id
	b.pending[id] = ch
	b.mu.Unlock()
	forget := func() {
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
	}
	b.wmu.Lock()
	b.ws.SetWriteDeadline(time.Now().Add(30 * time.Second))
	err := b.ws.WriteJSON(map[string]any{"id": id, "method": method, "params": params})
	b.wmu.Unlock()
	if err != nil {
		forget()
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", method, r.err)
		}
		return r.result, nil
	case <-ctx.Done():
		forget()
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// event keeps what the page logged that a reader would call a fault.
func (b *Browser) event(method string, params json.RawMessage) {
	var p struct {
		Type             string
		ExceptionDetails struct {
			Text      string
			Exception struct{ Description string }
		}
		Entry struct{ Level, Text string }
		Args  []struct{ Value any }
	}
	var line string
	switch method {
	case "Runtime.exceptionThrown", "Runtime.consoleAPICalled", "Log.entryAdded":
		json.Unmarshal(params, &p)
	default:
		return
	}
	switch {
	case method == "Runtime.exceptionThrown":
		line = "exception: " + p.ExceptionDetails.Text + " " + p.ExceptionDetails.Exception.Description
	case method == "Runtime.consoleAPICalled" && (p.Type == "error" || p.Type == "warning"):
		line = fmt.Sprintf("console.%s: %v", p.Type, p.Args)
	case method == "Log.entryAdded" && p.Entry.Level == "error":
		line = "log: " + p.Entry.Text
	default:
		return
	}
	b.mu.Lock()
	if len(b.logs) < maxLogs {
		b.logs = append(b.logs, line)
	}
	b.mu.Unlock()
}

// maxLogs bounds the faults kept.
const maxLogs = 1000

// Logs are the faults the page logged so far (the first 1,000).
func (b *Browser) Logs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.logs...)
}

// Open navigates the page to url.
func (b *Browser) Open(url string) error {
	_, err := b.Call("Page.navigate", map[string]any{"url": url})
	return err
}

// Eval runs expression in the page and decodes its value into v.
func (b *Browser) Eval(expression string, v any) error {
	return b.EvalContext(context.Background(), expression, v)
}

// EvalContext runs expression in the page, waiting for it if it is a
// promise, and decodes its value into v (nil: the value is dropped).
func (b *Browser) EvalContext(ctx context.Context, expression string, v any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	raw, err := b.CallContext(ctx, "Runtime.evaluate", map[string]any{"expression": expression, "returnByValue": true, "awaitPromise": true})
	if err != nil {
		return err
	}
	var r struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct {
			Text      string
			Exception struct{ Description string }
		}
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		if d := e.Exception.Description; d != "" {
			return errors.New(strings.SplitN(d, "\n", 2)[0])
		}
		return errors.New(e.Text)
	}
	if v == nil || r.Result.Value == nil {
		return nil
	}
	return json.Unmarshal(r.Result.Value, v)
}

// Screenshot is the page as a PNG: what the window shows, or the whole
// page (full).
func (b *Browser) Screenshot(full bool) ([]byte, error) {
	raw, err := b.Call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": full})
	if err != nil {
		return nil, err
	}
	var r struct{ Data string }
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// Close stops Chromium and every process it started.
func (b *Browser) Close() {
	if b.ws != nil {
		b.ws.Close()
		<-b.done
	}
	if b.cmd.Process != nil {
		killGroup(b.cmd)
	}
	b.cmd.Wait()
}
