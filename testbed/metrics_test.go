package testbed

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// scrape returns h's /metrics page.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := serveTo(h, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// gauge returns the value of the unlabelled metric name on h's /metrics page.
func gauge(t *testing.T, h http.Handler, name string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(scrape(t, h)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

func TestMetricsExposition(t *testing.T) {
	s, c := fast(t)
	_, alice := c.signup("alice")
	var chans []channel
	alice.do("GET", "/api/v4/users/me/channels", nil, &chans)
	alice.do("GET", "/api/v4/channels/"+chans[0].ID+"/posts", nil, nil)

	req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		text.WriteString(sc.Text() + "\n")
	}
	page := text.String()
	for _, want := range []string{
		`mattermost_api_time_bucket{handler="GetChannelPosts",method="GET",status_code="200",le="0.0005"}`,
		`mattermost_api_time_count{handler="Login",method="POST",status_code="200"} 1`,
		`mattermost_db_store_time_count{method="PostStore.GetPosts"} 1`,
		`mattermost_db_store_time_bucket{method="UserStore.Save",le="10"} 1`,
		"testbed_workers 8\n",
		"testbed_workers_busy 0\n",
		"testbed_queue_length 0\n",
		"process_cpu_seconds_total ",
		"process_resident_memory_bytes ",
		"go_goroutines ",
		"go_memstats_heap_inuse_bytes ",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if got := gauge(t, s.Handler(), "testbed_workers"); got != float64(s.Config().Workers) {
		t.Errorf("testbed_workers = %v, want %d", got, s.Config().Workers)
	}
}

func TestStoreTimeOnlyForSuccesses(t *testing.T) {
	_, c := fast(t)
	_, alice := c.signup("alice")
	alice.do("GET", "/api/v4/posts/missing/thread", nil, nil)
	req, _ := http.NewRequest("GET", c.base+"/metrics", nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var sawAPI bool
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, `mattermost_db_store_time_count{method="PostStore.Get"}`) {
			t.Errorf("a failed GetPostThread was counted as a store call: %s", line)
		}
		if line == `mattermost_api_time_count{handler="GetPostThread",method="GET",status_code="404"} 1` {
			sawAPI = true
		}
	}
	if !sawAPI {
		t.Error("the failed GetPostThread is not counted in mattermost_api_time with status_code 404")
	}
}
