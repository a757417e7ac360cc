// Package har turns a recorded browser session (a HAR file: Chromium's,
// Firefox's) into a headroom scenario: the requests to the application's
// origin, grouped by page, with the recording's pauses, and each value a
// response gave that a later request sent taken from that response as the
// scenario runs (correlation), so the scenario runs against a fresh server
// without edits. It knows nothing of running users: it writes Starlark.
package har

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// Bounds on what a HAR file may make headroom hold.
const (
	// MaxFile is the largest HAR read: response bodies are in it.
	MaxFile = 256 << 20
	// MaxEntries bounds the requests a session may hold.
	MaxEntries = 20_000
	// maxBody bounds a response body searched for values to correlate.
	maxBody = 4 << 20
)

// Log is what headroom reads of a HAR file (HAR 1.2, "log").
type Log struct {
	Pages   []Page  `json:"pages"`
	Entries []Entry `json:"entries"`
}

// Page is one page of the session.
type Page struct {
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Started time.Time `json:"startedDateTime"`
}

// Entry is one request and its response.
type Entry struct {
	PageRef  string    `json:"pageref"`
	Started  time.Time `json:"startedDateTime"`
	TimeMs   float64   `json:"time"`
	Request  Request   `json:"request"`
	Response Response  `json:"response"`
}

// Request is an entry's request.
type Request struct {
	Method   string   `json:"method"`
	URL      string   `json:"url"`
	Headers  []Header `json:"headers"`
	PostData *struct {
		MimeType string `json:"mimeType"`
		Text     string `json:"text"`
	} `json:"postData"`
}

// Response is an entry's response.
type Response struct {
	Status  int      `json:"status"`
	Headers []Header `json:"headers"`
	Content struct {
		MimeType string `json:"mimeType"`
		Text     string `json:"text"`
		Encoding string `json:"encoding"`
	} `json:"content"`
}

// Header is a header's name and value.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Read reads a HAR file, within MaxFile and MaxEntries.
func Read(r io.Reader) (*Log, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFile {
		return nil, fmt.Errorf("larger than %d MiB: not read", MaxFile>>20)
	}
	var f struct {
		Log *Log `json:"log"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a HAR file: %v", err)
	}
	if f.Log == nil {
		return nil, errors.New(`not a HAR file: no "log"`)
	}
	if len(f.Log.Entries) > MaxEntries {
		return nil, fmt.Errorf("%d requests, more than %d: record a shorter session", len(f.Log.Entries), MaxEntries)
	}
	for i, e := range f.Log.Entries {
		u, err := url.Parse(e.Request.URL)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("entry %d: %q is not an http(s) URL", i+1, e.Request.URL)
		}
		if e.Request.Method == "" {
			return nil, fmt.Errorf("entry %d (%s): no method", i+1, e.Request.URL)
		}
	}
	return f.Log, nil
}

// body is the response's body as text; "" when it was not recorded, is
// binary or is past maxBody.
func (r Response) body() string {
	c := r.Content
	if len(c.Text) > maxBody*4/3+4 {
		return ""
	}
	if c.Encoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(c.Text)
		if err != nil {
			return ""
		}
		return string(b)
	}
	return c.Text
}

// headerValue is the value of the named header, "" if none.
func headerValue(hs []Header, name string) string {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// static says whether an entry is a page's asset (a script, a style
// sheet, an image, a font, a source map), which a browser caches and a
// load test leaves out unless asked.
func static(e Entry) bool {
	mime := strings.ToLower(e.Response.Content.MimeType)
	for _, p := range []string{"text/css", "javascript", "image/", "font/", "application/font", "application/wasm"} {
		if strings.Contains(mime, p) {
			return true
		}
	}
	u, _ := url.Parse(e.Request.URL)
	p := strings.ToLower(u.Path)
	for _, ext := range []string{".js", ".mjs", ".css", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".woff", ".woff2", ".ttf", ".map", ".webp"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}
