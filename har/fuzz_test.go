package har

import (
	"bytes"
	"context"
	"testing"

	"github.com/headroom-dev/headroom/scenario"
)

// seedHAR is a small session: a login whose token and id later requests
// send, a redirect, a failed request, a form body.
const seedHAR = `{"log": {"pages": [{"id": "p1", "title": "Log \"in\"\n"}], "entries": [
 {"pageref": "p1", "startedDateTime": "2026-11-29T10:00:00Z", "time": 5,
  "request": {"method": "POST", "url": "http://127.0.0.1:8080/api/login?next=%2Fhome", "headers": [{"name": "Content-Type", "value": "application/json"}],
   "postData": {"mimeType": "application/json", "text": "{\"user\": \"ann\", \"n\": [1, 2.5, true, null]}"}},
  "response": {"status": 200, "headers": [{"name": "X-Session", "value": "s3ss10n-abcdef"}],
   "content": {"mimeType": "application/json", "text": "{\"token\": \"tok-0123456789abcdef\", \"user\": {\"id\": 40213}}"}}},
 {"pageref": "p2", "startedDateTime": "2026-11-29T10:00:01Z", "time": 5,
  "request": {"method": "GET", "url": "http://127.0.0.1:8080/api/users/40213?t=tok-0123456789abcdef", "headers": [{"name": "Authorization", "value": "Bearer tok-0123456789abcdef"}, {"name": "X-Session", "value": "s3ss10n-abcdef"}]},
  "response": {"status": 302, "headers": [{"name": "Location", "value": "/home"}], "content": {"mimeType": "text/html", "text": ""}}},
 {"pageref": "p2", "startedDateTime": "2026-11-29T10:00:02Z", "time": 5,
  "request": {"method": "PROPFIND", "url": "http://127.0.0.1:8080/dav/x", "headers": [],
   "postData": {"mimeType": "application/x-www-form-urlencoded", "text": "a=1&b=tok-0123456789abcdef"}},
  "response": {"status": 404, "headers": [], "content": {"mimeType": "application/json", "text": "eyJ4IjogMX0=", "encoding": "base64"}}}
]}}`

// FuzzConvertHAR: any HAR file is refused or converted, never a panic,
// and what it is converted into is always a scenario that loads.
func FuzzConvertHAR(f *testing.F) {
	f.Add([]byte(seedHAR))
	f.Add([]byte(`{"log": {"entries": []}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Read(bytes.NewReader(b))
		if err != nil {
			return
		}
		sc, err := Convert(l, Options{Source: "fuzz.har"})
		if err != nil {
			return
		}
		if _, err := scenario.Load(context.Background(), "fuzz.star", sc.Source, scenario.Limits{}); err != nil {
			t.Fatalf("the converted scenario does not load: %v\n%s", err, sc.Source)
		}
	})
}
