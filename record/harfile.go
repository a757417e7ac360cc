package record

import "time"

// HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/), as headroom
// writes it: every field the spec requires, and what `headroom convert`
// reads (pages and their titles, each entry's page, start, time and
// timings, request headers and body, response status, headers and text).

// File is a HAR file.
type File struct {
	Log Log `json:"log"`
}

// Log is a HAR file's log.
type Log struct {
	Version string  `json:"version"`
	Creator Creator `json:"creator"`
	Pages   []Page  `json:"pages"`
	Entries []Entry `json:"entries"`
	Comment string  `json:"comment,omitempty"`
}

// Creator names the program that wrote the file.
type Creator struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Page is one page the browser loaded: a navigation of its main frame.
type Page struct {
	Started time.Time   `json:"startedDateTime"`
	ID      string      `json:"id"`
	Title   string      `json:"title"`
	Timings PageTimings `json:"pageTimings"`
}

// PageTimings are when the page's DOMContentLoaded and load events fired,
// in milliseconds from its start; -1: not seen.
type PageTimings struct {
	OnContentLoad float64 `json:"onContentLoad"`
	OnLoad        float64 `json:"onLoad"`
}

// Entry is one request and its response.
type Entry struct {
	PageRef  string    `json:"pageref,omitempty"`
	Started  time.Time `json:"startedDateTime"`
	Time     float64   `json:"time"` // milliseconds: the sum of Timings' parts that are not -1
	Request  Request   `json:"request"`
	Response Response  `json:"response"`
	Cache    struct{}  `json:"cache"`
	Timings  Timings   `json:"timings"`
	ServerIP string    `json:"serverIPAddress,omitempty"`
	Conn     string    `json:"connection,omitempty"`
	Type     string    `json:"_resourceType,omitempty"` // Chromium's: Document, XHR, Fetch, Script, …
	Comment  string    `json:"comment,omitempty"`
}

// Request is an entry's request.
type Request struct {
	Method      string    `json:"method"`
	URL         string    `json:"url"`
	HTTPVersion string    `json:"httpVersion"`
	Cookies     []Cookie  `json:"cookies"`
	Headers     []NV      `json:"headers"`
	QueryString []NV      `json:"queryString"`
	PostData    *PostData `json:"postData,omitempty"`
	HeadersSize int       `json:"headersSize"`
	BodySize    int       `json:"bodySize"`
}

// PostData is a request's body.
type PostData struct {
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
}

// Response is an entry's response.
type Response struct {
	Status      int      `json:"status"`
	StatusText  string   `json:"statusText"`
	HTTPVersion string   `json:"httpVersion"`
	Cookies     []Cookie `json:"cookies"`
	Headers     []NV     `json:"headers"`
	Content     Content  `json:"content"`
	RedirectURL string   `json:"redirectURL"`
	HeadersSize int      `json:"headersSize"`
	BodySize    int      `json:"bodySize"`
	Transfer    int      `json:"_transferSize"` // bytes on the wire, headers included
}

// Content is a response's body.
type Content struct {
	Size     int    `json:"size"` // decoded, in bytes
	MimeType string `json:"mimeType"`
	Text     string `json:"text,omitempty"`
	Encoding string `json:"encoding,omitempty"` // "base64" for a binary body
	Comment  string `json:"comment,omitempty"`  // why Text is absent
}

// NV is a header's or a query parameter's name and value.
type NV struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Cookie is a cookie; headroom writes none (the Cookie and Set-Cookie
// headers hold what the page's requests carried, where Chromium said).
type Cookie struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Timings are where an entry's time went, in milliseconds; -1: not
// applicable (a reused connection has no dns, connect or ssl).
type Timings struct {
	Blocked float64 `json:"blocked"`
	DNS     float64 `json:"dns"`
	Connect float64 `json:"connect"`
	SSL     float64 `json:"ssl"`
	Send    float64 `json:"send"`
	Wait    float64 `json:"wait"`
	Receive float64 `json:"receive"`
}
