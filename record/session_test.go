package record

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/har"
)

// events is a session as DevTools tells it: a page reached through a
// redirect, its script, an XHR login whose token a later XHR sends, a
// request the cache answered, one refused, one still open at the end,
// then a second page.
var events = []struct {
	method string
	params string
}{
	{"Network.requestWillBeSent", `{"requestId": "1", "type": "Document", "frameId": "F", "timestamp": 100, "wallTime": 1795000000,
		"request": {"url": "http://127.0.0.1:8080/", "method": "GET", "headers": {"Accept": "text/html"}}}`},
	{"Network.requestWillBeSent", `{"requestId": "1", "type": "Document", "frameId": "F", "timestamp": 100.010, "wallTime": 1795000000.010,
		"request": {"url": "http://127.0.0.1:8080/home", "method": "GET", "headers": {"Accept": "text/html"}},
		"redirectResponse": {"status": 302, "statusText": "Found", "headers": {"Location": "/home"}, "mimeType": "text/html", "protocol": "http/1.1"}}`},
	{"Network.responseReceived", `{"requestId": "1", "type": "Document", "timestamp": 100.030, "response": {"url": "http://127.0.0.1:8080/home",
		"status": 200, "statusText": "OK", "headers": {"Content-Type": "text/html", "Set-Cookie": "a=1\nb=2"}, "mimeType": "text/html",
		"protocol": "http/1.1", "connectionId": 7, "remoteIPAddress": "127.0.0.1",
		"timing": {"requestTime": 100.012, "dnsStart": -1, "dnsEnd": -1, "connectStart": 1, "connectEnd": 3, "sslStart": -1, "sslEnd": -1,
			"sendStart": 4, "sendEnd": 5, "receiveHeadersEnd": 15}}}`},
	{"Network.dataReceived", `{"requestId": "1", "timestamp": 100.031, "dataLength": 20, "encodedDataLength": 20}`},
	{"Network.loadingFinished", `{"requestId": "1", "timestamp": 100.040, "encodedDataLength": 120}`},
	{"Network.requestWillBeSent", `{"requestId": "2", "type": "Script", "frameId": "F", "timestamp": 100.050, "wallTime": 1795000000.050,
		"request": {"url": "http://127.0.0.1:8080/app.js", "method": "GET", "headers": {}}}`},
	{"Network.responseReceived", `{"requestId": "2", "type": "Script", "timestamp": 100.060, "response": {"status": 200, "headers": {},
		"mimeType": "text/javascript"}}`},
	{"Network.dataReceived", `{"requestId": "2", "timestamp": 100.061, "dataLength": 5000}`},
	{"Network.loadingFinished", `{"requestId": "2", "timestamp": 100.070, "encodedDataLength": 5100}`},
	{"Network.requestWillBeSent", `{"requestId": "3", "type": "XHR", "frameId": "F", "timestamp": 100.100, "wallTime": 1795000000.100,
		"request": {"url": "http://127.0.0.1:8080/api/login", "method": "POST", "hasPostData": true,
			"headers": {"Content-Type": "application/json"}, "postDataEntries": [{"bytes": "eyJ1c2VyIjogImFubiJ9"}]}}`},
	{"Network.responseReceived", `{"requestId": "3", "type": "XHR", "timestamp": 100.120, "response": {"status": 200, "headers": {},
		"mimeType": "application/json"}}`},
	{"Network.loadingFinished", `{"requestId": "3", "timestamp": 100.130, "encodedDataLength": 90}`},
	{"Page.domContentEventFired", `{"timestamp": 100.200}`},
	{"Page.loadEventFired", `{"timestamp": 100.250}`},
	{"Network.requestWillBeSent", `{"requestId": "4", "type": "XHR", "frameId": "F", "timestamp": 101, "wallTime": 1795000001,
		"request": {"url": "http://127.0.0.1:8080/api/me?x=1&y=a%20b", "method": "GET", "headers": {"Authorization": "Bearer tok-0123456789abcdef"}}}`},
	{"Network.responseReceived", `{"requestId": "4", "type": "XHR", "timestamp": 101.010, "response": {"status": 200, "headers": {},
		"mimeType": "application/json"}}`},
	{"Network.loadingFinished", `{"requestId": "4", "timestamp": 101.020, "encodedDataLength": 90}`},
	{"Network.requestWillBeSent", `{"requestId": "5", "type": "Image", "frameId": "F", "timestamp": 101.1, "wallTime": 1795000001.1,
		"request": {"url": "http://127.0.0.1:8080/logo.png", "method": "GET", "headers": {}}}`},
	{"Network.requestServedFromCache", `{"requestId": "5"}`},
	{"Network.responseReceived", `{"requestId": "5", "type": "Image", "timestamp": 101.101, "response": {"status": 200, "headers": {}, "mimeType": "image/png"}}`},
	{"Network.loadingFinished", `{"requestId": "5", "timestamp": 101.102, "encodedDataLength": 0}`},
	{"Network.requestWillBeSent", `{"requestId": "6", "type": "Image", "frameId": "F", "timestamp": 101.2, "wallTime": 1795000001.2,
		"request": {"url": "https://cdn.example/x.png", "method": "GET", "headers": {}}}`},
	{"Network.loadingFailed", `{"requestId": "6", "timestamp": 101.21, "errorText": "net::ERR_EMPTY_RESPONSE"}`},
	{"Network.requestWillBeSent", `{"requestId": "7", "type": "Document", "frameId": "F", "timestamp": 102, "wallTime": 1795000002,
		"request": {"url": "http://127.0.0.1:8080/items", "method": "GET", "headers": {}}}`},
	{"Network.responseReceived", `{"requestId": "7", "type": "Document", "timestamp": 102.01, "response": {"status": 200, "headers": {},
		"mimeType": "text/html"}}`},
	{"Network.loadingFinished", `{"requestId": "7", "timestamp": 102.02, "encodedDataLength": 90}`},
	{"Network.requestWillBeSent", `{"requestId": "8", "type": "Fetch", "frameId": "F", "timestamp": 102.1, "wallTime": 1795000002.1,
		"request": {"url": "http://127.0.0.1:8080/api/poll", "method": "GET", "headers": {}}}`},
}

// A session's events make a HAR file that convert reads: a page a
// navigation of the main frame (a redirect's hops on it), each hop an
// entry with its timings, the bodies convert reads kept and the others
// not, what the cache answered or got no response left out and counted.
func TestEventsMakeAHARFile(t *testing.T) {
	s := newSession("F", 100, 1<<20, 1<<20)
	bodies := map[string]string{"1": "<title>Home</title>", "3": `{"token": "tok-0123456789abcdef"}`, "4": `{"name": "ann"}`, "7": "<p>items</p>"}
	var asked []string
	for _, ev := range events {
		a := s.handle(ev.method, json.RawMessage(ev.params))
		if a.e == nil {
			continue
		}
		asked = append(asked, a.e.id)
		if !a.post {
			s.setBody(a.e, bodies[a.e.id], false)
		}
		if ev.method == "Network.loadingFinished" && a.e.id == "1" {
			s.setTitle("Home")
		}
	}
	if got := strings.Join(asked, ","); got != "1,3,4,7" {
		t.Errorf("bodies asked for %s, want the page's, the XHRs' and the second page's: 1,3,4,7", got)
	}
	if s.inflight != 1 || s.loaded {
		t.Errorf("in flight %d, loaded %v: want the poll open and the second page not loaded yet", s.inflight, s.loaded)
	}
	l, out := s.har(Creator{Name: "headroom", Version: "test"})
	if out.cached != 1 || out.failed != 1 || out.unanswered != 1 || len(out.failures) != 1 {
		t.Errorf("left out %+v: want 1 cached, 1 failed, 1 unanswered", out)
	}
	var urls []string
	for _, e := range l.Entries {
		urls = append(urls, e.Request.Method+" "+e.Request.URL+" "+e.PageRef)
	}
	want := []string{"GET http://127.0.0.1:8080/ page_1", "GET http://127.0.0.1:8080/home page_1", "GET http://127.0.0.1:8080/app.js page_1",
		"POST http://127.0.0.1:8080/api/login page_1", "GET http://127.0.0.1:8080/api/me?x=1&y=a%20b page_1", "GET http://127.0.0.1:8080/items page_2"}
	if strings.Join(urls, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(urls, "\n"), strings.Join(want, "\n"))
	}
	if len(l.Pages) != 2 || l.Pages[0].Title != "Home" || l.Pages[1].Title != "http://127.0.0.1:8080/items" ||
		l.Pages[0].Timings.OnLoad != 250 || l.Pages[0].Timings.OnContentLoad != 200 {
		t.Errorf("pages %+v: want Home (loaded at 250 ms) and the second named by its URL", l.Pages)
	}
	hop, page, script, login, me := l.Entries[0], l.Entries[1], l.Entries[2], l.Entries[3], l.Entries[4]
	if hop.Response.Status != 302 || hop.Response.RedirectURL != "/home" || hop.Time != 10 {
		t.Errorf("the redirect's hop: %d to %q in %v ms, want 302 to /home in 10", hop.Response.Status, hop.Response.RedirectURL, hop.Time)
	}
	// issued at 100.010, sent at requestTime 100.012 + 1 ms (connect), headers at +15, done at 100.040
	if tm := page.Timings; tm.Blocked != 3 || tm.DNS != -1 || tm.Connect != 2 || tm.Send != 1 || tm.Wait != 10 || tm.Receive != 13 || page.Time != 29 {
		t.Errorf("the page's timings %+v, time %v: want blocked 3, dns -1, connect 2, send 1, wait 10, receive 13: 29 ms", tm, page.Time)
	}
	if page.Response.Content.Text != "<title>Home</title>" || page.Response.Content.Size != 20 || page.Conn != "7" || page.Response.Transfer != 120 {
		t.Errorf("the page's response %+v, connection %q", page.Response, page.Conn)
	}
	cookies := 0
	for _, h := range page.Response.Headers {
		if h.Name == "Set-Cookie" {
			cookies++
		}
	}
	if cookies != 2 {
		t.Errorf("headers %+v: want each Set-Cookie its own", page.Response.Headers)
	}
	if script.Response.Content.Text != "" || !strings.Contains(script.Response.Content.Comment, "type Script") || script.Response.Content.Size != 5000 {
		t.Errorf("the script's content %+v: want no body, said why, its size", script.Response.Content)
	}
	if login.Request.PostData == nil || login.Request.PostData.Text != `{"user": "ann"}` || login.Request.PostData.MimeType != "application/json" {
		t.Errorf("the login's body %+v, want its JSON from the entries' bytes", login.Request.PostData)
	}
	if len(me.Request.QueryString) != 2 || me.Request.QueryString[1] != (NV{"y", "a b"}) {
		t.Errorf("query %+v", me.Request.QueryString)
	}

	// What convert reads of it: the token the login gave is the header a
	// later request sent.
	b, err := json.Marshal(File{Log: l})
	if err != nil {
		t.Fatal(err)
	}
	hl, err := har.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := har.Convert(hl, har.Options{Source: "s.har"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Correlations) != 1 || !strings.Contains(sc.Correlations[0], `POST /api/login json "token" -> GET /api/me header authorization`) {
		t.Errorf("correlations %q, want the login's token in /api/me's header\n%s", sc.Correlations, sc.Source)
	}
}

// The session keeps at most its bounds: requests past MaxRequests are
// dropped and said; a body past MaxBody, or past what all may hold, is
// left out with why.
func TestSessionBounds(t *testing.T) {
	s := newSession("F", 2, 10, 15)
	for i, id := range []string{"a", "b", "c"} {
		s.handle("Network.requestWillBeSent", json.RawMessage(`{"requestId": "`+id+`", "type": "XHR", "timestamp": `+strconv.Itoa(i+1)+`,
			"request": {"url": "http://127.0.0.1/x", "method": "GET"}}`))
	}
	if !s.full || s.dropped != 1 || len(s.entries) != 2 {
		t.Errorf("full %v, dropped %d, kept %d: want the third dropped", s.full, s.dropped, len(s.entries))
	}
	a, b := s.entries[0], s.entries[1]
	s.setBody(a, "0123456789", false)
	s.setBody(b, "0123456789", false)
	if a.body == "" || b.body != "" || !strings.Contains(b.note, "total bound") {
		t.Errorf("bodies %q %q (%s): want the first kept, the second past the total", a.body, b.body, b.note)
	}
	c := &entry{}
	s.setBody(c, "0123456789A", false)
	if c.body != "" || !strings.Contains(c.note, "--max-body") {
		t.Errorf("a body past MaxBody: %q (%s)", c.body, c.note)
	}
}
