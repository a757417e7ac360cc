// Package browser drives a real headless Chromium over the DevTools
// protocol, for the tests that watch a page as a person would (the live
// view's): open a URL, read the page with a script, take a screenshot,
// hear what the page logged. Debian's chromium is the one scripts/test.sh
// installs.
package browser

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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

// Browser is one headless Chromium with one page.
type Browser struct {
	cmd *exec.Cmd
	ws  *websocket.Conn
	id  int

	mu   sync.Mutex
	logs []string // what the page logged: exceptions, console and log entries of level error
}

// Start starts Chromium with its own profile in dir, and its page.
func Start(ctx context.Context, dir string) (*Browser, error) {
	cmd := exec.CommandContext(ctx, Bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--no-default-browser-check", "--hide-scrollbars", "--mute-audio", "--window-size=1200,1600",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--remote-debugging-port=0", "about:blank")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_CACHE_HOME="+dir)
	ownGroup(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &Browser{cmd: cmd}
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
	if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
		return err
	}
	for _, t := range targets {
		if t.Type == "page" {
			if b.ws, _, err = websocket.DefaultDialer.DialContext(ctx, t.WebSocketDebuggerURL, nil); err != nil {
				return err
			}
			for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
				if _, err := b.Call(m, nil); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return errors.New("chromium has no page")
}

// Call calls a DevTools method and returns its result.
func (b *Browser) Call(method string, params any) (json.RawMessage, error) {
	b.id++
	id := b.id
	b.ws.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := b.ws.WriteJSON(map[string]any{"id": id, "method": method, "params": params}); err != nil {
		return nil, err
	}
	b.ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		var m struct {
			ID     int
			Method string
			Params json.RawMessage
			Result json.RawMessage
			Error  *struct{ Message string }
		}
		if err := b.ws.ReadJSON(&m); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if m.ID == id {
			if m.Error != nil {
				return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
			}
			return m.Result, nil
		}
		b.event(m.Method, m.Params)
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
	json.Unmarshal(params, &p)
	var line string
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
	b.logs = append(b.logs, line)
	b.mu.Unlock()
}

// Logs are the faults the page logged so far.
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
	raw, err := b.Call("Runtime.evaluate", map[string]any{"expression": expression, "returnByValue": true})
	if err != nil {
		return err
	}
	var r struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct{ Text string }
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("%s: %s", expression, r.ExceptionDetails.Text)
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
	}
	if b.cmd.Process != nil {
		killGroup(b.cmd)
	}
	b.cmd.Wait()
}
