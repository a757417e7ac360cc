package record

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"
)

// session is what the page's DevTools events said so far: its pages and
// its requests, each hop of a redirect its own. It is pure: events in,
// a HAR out; the caller asks Chromium for the bodies it names.
type session struct {
	mainFrame   string
	maxRequests int // requests kept at most; past it, full
	maxBody     int // bytes of a body kept at most
	bodyBudget  int // bytes of bodies still to keep, all together

	pages   []*page
	entries []*entry          // every hop, in the order they started
	current map[string]*entry // a request id's hop in flight
	full    bool              // a request came past maxRequests
	dropped int               // requests not kept once full

	inflight int     // requests started and not done, long-lived streams left out
	loaded   bool    // the last page's load event fired (true before any page)
	last     float64 // when the network was last busy: DevTools' clock, in seconds
}

// page is one navigation of the main frame.
type page struct {
	id      string
	url     string
	title   string
	wall    time.Time
	ts      float64 // DevTools' monotonic clock, in seconds
	content float64 // ms from ts; -1: not fired
	load    float64
}

// entry is one hop of one request.
type entry struct {
	id       string
	page     *page
	typ      string
	wall     time.Time
	ts       float64
	req      cdpRequest
	postData string
	resp     *cdpResponse
	respTS   float64
	end      float64
	done     bool
	failed   string // the error of a request that got no response
	cached   bool   // served from the browser's cache: it never reached the server
	size     int    // decoded bytes received
	transfer int    // bytes on the wire
	body     string
	base64   bool
	note     string // why the body is absent
}

type cdpRequest struct {
	URL             string            `json:"url"`
	URLFragment     string            `json:"urlFragment"`
	Method          string            `json:"method"`
	Headers         map[string]string `json:"headers"`
	PostData        string            `json:"postData"`
	HasPostData     bool              `json:"hasPostData"`
	PostDataEntries []struct {
		Bytes string `json:"bytes"`
	} `json:"postDataEntries"`
}

type cdpResponse struct {
	URL               string            `json:"url"`
	Status            int               `json:"status"`
	StatusText        string            `json:"statusText"`
	Headers           map[string]string `json:"headers"`
	MimeType          string            `json:"mimeType"`
	ConnectionID      float64           `json:"connectionId"`
	RemoteIPAddress   string            `json:"remoteIPAddress"`
	FromDiskCache     bool              `json:"fromDiskCache"`
	FromPrefetchCache bool              `json:"fromPrefetchCache"`
	EncodedDataLength float64           `json:"encodedDataLength"`
	Protocol          string            `json:"protocol"`
	Timing            *cdpTiming        `json:"timing"`
}

// cdpTiming is DevTools' ResourceTiming: RequestTime in seconds on its
// monotonic clock, the rest in milliseconds after it (-1: not done).
type cdpTiming struct {
	RequestTime       float64 `json:"requestTime"`
	DNSStart          float64 `json:"dnsStart"`
	DNSEnd            float64 `json:"dnsEnd"`
	ConnectStart      float64 `json:"connectStart"`
	ConnectEnd        float64 `json:"connectEnd"`
	SSLStart          float64 `json:"sslStart"`
	SSLEnd            float64 `json:"sslEnd"`
	SendStart         float64 `json:"sendStart"`
	SendEnd           float64 `json:"sendEnd"`
	ReceiveHeadersEnd float64 `json:"receiveHeadersEnd"`
}

func newSession(mainFrame string, maxRequests, maxBody, bodyBudget int) *session {
	return &session{mainFrame: mainFrame, maxRequests: maxRequests, maxBody: maxBody, bodyBudget: bodyBudget,
		current: map[string]*entry{}, loaded: true}
}

// ask is what the caller is to ask Chromium for now, of a hop: its
// response's body (Network.getResponseBody, then setBody) or its
// request's (Network.getRequestPostData, then setPostData).
type ask struct {
	e    *entry
	post bool
}

// handle takes one event, and returns what to ask for (a zero ask: nothing).
func (s *session) handle(method string, params json.RawMessage) ask {
	switch method {
	case "Network.requestWillBeSent":
		return s.requestWillBeSent(params)
	case "Network.requestServedFromCache":
		if e, _ := s.event(params, nil); e != nil {
			e.cached = true
		}
	case "Network.responseReceived":
		var p struct {
			Response cdpResponse `json:"response"`
			Type     string      `json:"type"`
		}
		if e, ts := s.event(params, &p); e != nil {
			e.resp, e.respTS = &p.Response, ts
			if p.Response.FromDiskCache || p.Response.FromPrefetchCache {
				e.cached = true
			}
			if p.Type != "" {
				e.typ = p.Type
			}
		}
	case "Network.dataReceived":
		var p struct {
			DataLength int `json:"dataLength"`
		}
		if e, _ := s.event(params, &p); e != nil {
			e.size += p.DataLength
		}
	case "Network.loadingFinished":
		var p struct {
			EncodedDataLength float64 `json:"encodedDataLength"`
		}
		if e, ts := s.event(params, &p); e != nil {
			e.transfer = int(p.EncodedDataLength)
			s.finish(e, ts)
			delete(s.current, e.id)
			return ask{e: s.wantBody(e)}
		}
	case "Network.loadingFailed":
		s.loadingFailed(params)
	case "Page.domContentEventFired", "Page.loadEventFired":
		s.pageEvent(method == "Page.loadEventFired", params)
	}
	return ask{}
}

// requestWillBeSent starts a request's entry (and a page's, for the main
// frame's document), ending the hop a redirect replaced; it asks for the
// request's body when the event left it out.
func (s *session) requestWillBeSent(params json.RawMessage) ask {
	var p struct {
		RequestID        string       `json:"requestId"`
		Request          cdpRequest   `json:"request"`
		Timestamp        float64      `json:"timestamp"`
		WallTime         float64      `json:"wallTime"`
		RedirectResponse *cdpResponse `json:"redirectResponse"`
		Type             string       `json:"type"`
		FrameID          string       `json:"frameId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ask{}
	}
	s.last = max(s.last, p.Timestamp)
	if prev := s.current[p.RequestID]; prev != nil && p.RedirectResponse != nil {
		// the hop that was redirected ends where the next begins
		prev.resp, prev.respTS = p.RedirectResponse, p.Timestamp
		s.finish(prev, p.Timestamp)
	} else if prev != nil {
		s.finish(prev, p.Timestamp)
	}
	if len(s.entries) >= s.maxRequests {
		delete(s.current, p.RequestID)
		s.full = true
		s.dropped++
		return ask{}
	}
	e := &entry{id: p.RequestID, typ: p.Type, req: p.Request, ts: p.Timestamp, wall: wallTime(p.WallTime)}
	if p.Type == "Document" && p.FrameID == s.mainFrame && p.RedirectResponse == nil {
		s.pages = append(s.pages, &page{id: fmt.Sprintf("page_%d", len(s.pages)+1), url: p.Request.URL, wall: e.wall, ts: p.Timestamp,
			content: -1, load: -1})
		s.loaded = false
	}
	if n := len(s.pages); n > 0 {
		e.page = s.pages[n-1]
	}
	e.postData = postData(p.Request)
	s.entries = append(s.entries, e)
	s.current[p.RequestID] = e
	if !streaming(p.Type) {
		s.inflight++
	}
	if e.postData == "" && p.Request.HasPostData {
		return ask{e: e, post: true}
	}
	return ask{}
}

// loadingFailed ends a request that got no response: why, in its entry.
func (s *session) loadingFailed(params json.RawMessage) {
	var p struct {
		ErrorText     string `json:"errorText"`
		Canceled      bool   `json:"canceled"`
		BlockedReason string `json:"blockedReason"`
	}
	if e, ts := s.event(params, &p); e != nil {
		e.failed = p.ErrorText
		if p.Canceled {
			e.failed = "canceled by the page"
		}
		if p.BlockedReason != "" {
			e.failed += " (blocked: " + p.BlockedReason + ")"
		}
		s.finish(e, ts)
		delete(s.current, e.id)
	}
}

// pageEvent notes when the current page's DOM was ready or it loaded
// (load), in milliseconds from its document's request.
func (s *session) pageEvent(load bool, params json.RawMessage) {
	var p struct {
		Timestamp float64 `json:"timestamp"`
	}
	if json.Unmarshal(params, &p) != nil || len(s.pages) == 0 {
		return
	}
	pg := s.pages[len(s.pages)-1]
	at := math.Max(0, (p.Timestamp-pg.ts)*1000)
	if load {
		pg.load, s.loaded = at, true
	} else {
		pg.content = at
	}
}

// event decodes a Network event of a request in flight into p (if not
// nil) and returns that request's hop and the event's time, moving the
// clock to it.
func (s *session) event(params json.RawMessage, p any) (*entry, float64) {
	var id struct {
		RequestID string  `json:"requestId"`
		Timestamp float64 `json:"timestamp"`
	}
	if json.Unmarshal(params, &id) != nil {
		return nil, 0
	}
	if p != nil && json.Unmarshal(params, p) != nil {
		return nil, 0
	}
	s.last = max(s.last, id.Timestamp)
	return s.current[id.RequestID], id.Timestamp
}

// finish ends a hop at ts (DevTools' clock, in seconds).
func (s *session) finish(e *entry, ts float64) {
	if e.done {
		return
	}
	e.done, e.end = true, ts
	if !streaming(e.typ) {
		s.inflight--
	}
}

// streaming says whether a request of this type may stay open for the
// page's life (it never counts as in flight).
func streaming(typ string) bool { return typ == "EventSource" || typ == "WebSocket" }

// bodyTypes are the resource types whose bodies are kept: what convert
// reads. Scripts, style sheets, images, fonts and media are left out, as
// convert leaves those requests out.
var bodyTypes = map[string]bool{"Document": true, "XHR": true, "Fetch": true, "Other": true, "Prefetch": true, "Preflight": true}

// media says whether a body of this type is an image, a font, a sound
// or a film, whatever the request's type.
func media(mime string) bool {
	for _, p := range []string{"image/", "font/", "audio/", "video/"} {
		if strings.HasPrefix(mime, p) {
			return true
		}
	}
	return false
}

// wantBody returns e if its body is to be asked for, or says why not.
func (s *session) wantBody(e *entry) *entry {
	switch {
	case e.resp == nil || e.cached || e.resp.Status == 204 || e.resp.Status == 304 || e.resp.Status >= 300 && e.resp.Status < 400:
		return nil
	case !bodyTypes[e.typ]:
		e.note = "not kept: a request of type " + e.typ + " (convert leaves such requests out)"
		return nil
	case media(e.resp.MimeType):
		e.note = "not kept: " + e.resp.MimeType + " (convert leaves such requests out)"
		return nil
	case e.size > s.maxBody:
		e.note = fmt.Sprintf("not kept: %d bytes, past --max-body", e.size)
		return nil
	case e.size > s.bodyBudget:
		e.note = "not kept: the recording's bodies passed their total bound"
		return nil
	}
	return e
}

// setBody keeps the body Chromium gave for e, within the bounds.
func (s *session) setBody(e *entry, body string, b64 bool) {
	n := len(body)
	if b64 {
		n = base64.StdEncoding.DecodedLen(len(body))
	}
	switch {
	case n > s.maxBody:
		e.note = fmt.Sprintf("not kept: %d bytes, past --max-body", n)
	case n > s.bodyBudget:
		e.note = "not kept: the recording's bodies passed their total bound"
	default:
		e.body, e.base64 = body, b64
		s.bodyBudget -= len(body)
		if e.size == 0 {
			e.size = n
		}
	}
}

// setPostData keeps a request's body Chromium gave when asked.
func (s *session) setPostData(e *entry, body string) {
	if len(body) <= s.maxBody {
		e.postData = body
	}
}

// setTitle names the last page.
func (s *session) setTitle(title string) {
	if n := len(s.pages); n > 0 && title != "" {
		s.pages[n-1].title = title
	}
}

// wallTime is DevTools' wall time (seconds since the epoch) as a time.
func wallTime(sec float64) time.Time {
	return time.Unix(0, int64(sec*1e9)).UTC()
}

// postData is a request's body as DevTools gave it in the event ("" when
// it must be asked for: hasPostData with neither).
func postData(r cdpRequest) string {
	if r.PostData != "" {
		return r.PostData
	}
	var b strings.Builder
	for _, p := range r.PostDataEntries {
		d, err := base64.StdEncoding.DecodeString(p.Bytes)
		if err != nil {
			return ""
		}
		b.Write(d)
	}
	return b.String()
}

// Left out of a HAR, and why.
type leftOut struct {
	cached, failed, unanswered int
	failures                   []*entry // the first few
}

// har is the session as a HAR file's log: the hops that got a response
// and reached the server, in the order they started.
func (s *session) har(creator Creator) (Log, leftOut) {
	l := Log{Version: "1.2", Creator: creator, Pages: []Page{}, Entries: []Entry{}}
	var out leftOut
	used := map[*page]bool{}
	for _, e := range s.entries {
		switch {
		case e.cached:
			out.cached++
			continue
		case e.resp == nil && e.failed != "":
			out.failed++
			if len(out.failures) < 10 {
				out.failures = append(out.failures, e)
			}
			continue
		case e.resp == nil:
			out.unanswered++
			continue
		}
		used[e.page] = true
		l.Entries = append(l.Entries, e.har(s.last))
	}
	for _, p := range s.pages {
		if used[p] {
			l.Pages = append(l.Pages, Page{Started: p.wall, ID: p.id, Title: orElse(p.title, p.url),
				Timings: PageTimings{OnContentLoad: round(p.content), OnLoad: round(p.load)}})
		}
	}
	return l, out
}

// har is one hop as a HAR entry; a hop not done ends at now.
func (e *entry) har(now float64) Entry {
	end := e.end
	if !e.done {
		end = now
	}
	r := e.resp
	he := Entry{Started: e.wall, Type: e.typ, ServerIP: strings.Trim(r.RemoteIPAddress, "[]")}
	if e.page != nil {
		he.PageRef = e.page.id
	}
	if r.ConnectionID > 0 {
		he.Conn = fmt.Sprint(int64(r.ConnectionID))
	}
	if !e.done {
		he.Comment = "still open when the recording ended"
	}
	version := httpVersion(r.Protocol)
	u := e.req.URL + e.req.URLFragment
	he.Request = Request{Method: e.req.Method, URL: u, HTTPVersion: version, Cookies: []Cookie{}, Headers: headers(e.req.Headers),
		QueryString: query(e.req.URL), HeadersSize: -1, BodySize: 0}
	if e.postData != "" {
		he.Request.PostData = &PostData{MimeType: header(e.req.Headers, "content-type"), Text: e.postData}
		he.Request.BodySize = len(e.postData)
	}
	he.Response = Response{Status: r.Status, StatusText: r.StatusText, HTTPVersion: version, Cookies: []Cookie{}, Headers: headers(r.Headers),
		RedirectURL: header(r.Headers, "location"), HeadersSize: -1, BodySize: -1, Transfer: e.transfer,
		Content: Content{Size: e.size, MimeType: r.MimeType, Text: e.body, Comment: e.note}}
	if e.base64 {
		he.Response.Content.Encoding = "base64"
	}
	he.Timings = timings(e.ts, e.respTS, end, r.Timing)
	for _, t := range []float64{he.Timings.Blocked, he.Timings.DNS, he.Timings.Connect, he.Timings.Send, he.Timings.Wait, he.Timings.Receive} {
		if t > 0 {
			he.Time += t
		}
	}
	he.Time = round(he.Time)
	return he
}

// timings split a hop's time, as Chromium's own HAR export does: issued
// at issue, its headers in at resp, done at end (seconds on DevTools'
// clock); t, when the network stack gave it, says where the rest went.
func timings(issue, resp, end float64, t *cdpTiming) Timings {
	ms := func(sec float64) float64 { return round(math.Max(0, sec*1000)) }
	if t == nil || t.RequestTime == 0 {
		return Timings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1, Send: 0, Wait: ms(resp - issue), Receive: ms(end - resp)}
	}
	span := func(a, b float64) float64 {
		if a < 0 || b < a {
			return -1
		}
		return round(b - a)
	}
	blocked := math.Max(0, (t.RequestTime-issue)*1000)
	if first := leastNonNegative(t.DNSStart, t.ConnectStart, t.SendStart); first > 0 {
		blocked += first
	}
	return Timings{
		Blocked: round(blocked),
		DNS:     span(t.DNSStart, t.DNSEnd),
		Connect: span(t.ConnectStart, t.ConnectEnd),
		SSL:     span(t.SSLStart, t.SSLEnd),
		Send:    round(math.Max(0, t.SendEnd-t.SendStart)),
		Wait:    round(math.Max(0, t.ReceiveHeadersEnd-t.SendEnd)),
		Receive: ms(end - t.RequestTime - t.ReceiveHeadersEnd/1000),
	}
}

func leastNonNegative(vs ...float64) float64 {
	least := -1.0
	for _, v := range vs {
		if v >= 0 && (least < 0 || v < least) {
			least = v
		}
	}
	return least
}

// round keeps a millisecond figure to the microsecond.
func round(ms float64) float64 { return math.Round(ms*1000) / 1000 }

// headers are DevTools' headers as HAR's, in name order; a value that
// joins several with newlines is several headers.
func headers(h map[string]string) []NV {
	out := []NV{}
	for k, v := range h {
		for _, one := range strings.Split(v, "\n") {
			out = append(out, NV{Name: k, Value: one})
		}
	}
	slices.SortStableFunc(out, func(a, b NV) int { return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return out
}

func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// query is a URL's query as HAR's name-value pairs, decoded.
func query(raw string) []NV {
	out := []NV{}
	u, err := url.Parse(raw)
	if err != nil || u.RawQuery == "" {
		return out
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		dk, err1 := url.QueryUnescape(k)
		dv, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			dk, dv = k, v
		}
		out = append(out, NV{Name: dk, Value: dv})
	}
	return out
}

// httpVersion is DevTools' protocol name as HAR writes it.
func httpVersion(p string) string {
	switch p {
	case "", "http/1.1":
		return "HTTP/1.1"
	case "http/1.0":
		return "HTTP/1.0"
	}
	return p // h2, h3
}

func orElse(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
