package prom

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

const (
	// ScrapeTimeout bounds one scrape of one target.
	ScrapeTimeout = 2 * time.Second
	// maxScrapeBody bounds the body read from one target.
	maxScrapeBody = 64 << 20
	// MaxScrapeSamples bounds the samples one scrape of one target may
	// bring (a histogram's buckets count one each), as Prometheus's
	// sample_limit does: past it the scrape fails (up is 0), so an
	// endpoint with runaway cardinality cannot fill the store. Real
	// exporters bring thousands.
	MaxScrapeSamples = 100_000
	// maxConcurrentScrapes caps the targets scraped at once.
	maxConcurrentScrapes = 8
	// acceptText asks for the Prometheus text format, version 0.0.4.
	acceptText = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
)

// Scraper scrapes Prometheus text-format endpoints into a Store, like
// Prometheus would: every series gets job (Job, "scrape" by default) and
// instance ("host:port" of the target) labels, and the scrape time as its
// timestamp; each target also gets an up series, 1 if the scrape succeeded and
// 0 if not, and a scrape_duration_seconds series. A target whose body does not
// parse counts as failed and adds nothing but up and scrape_duration_seconds.
// Safe for concurrent use once Job is set.
type Scraper struct {
	// Job is the job label of every series scraped. Set it before scraping.
	Job string
	// Gathered, if set, also gets what each successful scrape parsed
	// (e.g. to keep server-side figures for the result). It is called
	// from several goroutines at once.
	Gathered func(url string, mfs []*dto.MetricFamily, t time.Time)

	store   *Store
	targets []target
	client  *http.Client
}

type target struct {
	url      string
	instance string
}

// NewScraper returns a scraper of targets (absolute http or https URLs, such
// as http://127.0.0.1:9100/metrics) into s (nil: store nothing, only call
// Gathered), using client (a plain
// http.Client if nil; each request has its own timeout of ScrapeTimeout).
func NewScraper(s *Store, targets []string, client *http.Client) (*Scraper, error) {
	if client == nil {
		client = &http.Client{}
	}
	sc := &Scraper{Job: "scrape", store: s, client: client}
	for _, raw := range targets {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("scrape target %q: %w", raw, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("scrape target %q: want an http or https URL such as http://127.0.0.1:9100/metrics", raw)
		}
		sc.targets = append(sc.targets, target{url: u.String(), instance: instance(u)})
	}
	return sc, nil
}

// instance is the target's host:port, with the scheme's default port when the
// URL has none, as Prometheus 2 labels its targets.
func instance(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Scrape scrapes every target once, at most 8 at a time and each within
// ScrapeTimeout, and stores what it got at time t. It returns one error per
// failed target, naming its URL (nil if every scrape succeeded); a failed
// target gets up=0.
func (sc *Scraper) Scrape(ctx context.Context, t time.Time) []error {
	errs := make([]error, len(sc.targets))
	sem := make(chan struct{}, maxConcurrentScrapes)
	var wg sync.WaitGroup
	for i, tg := range sc.targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = sc.scrapeOne(ctx, tg, t)
		}()
	}
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	return failed
}

func (sc *Scraper) scrapeOne(ctx context.Context, tg target, t time.Time) error {
	extra := labels.FromStrings(model.JobLabel, sc.Job, model.InstanceLabel, tg.instance)
	start := time.Now()
	mfs, err := sc.fetch(ctx, tg)
	took := time.Since(start)
	up := 1.0
	switch {
	case err != nil:
		up = 0
	case sc.store != nil:
		sc.store.AppendGathered(mfs, t, extra)
	}
	if err == nil && sc.Gathered != nil {
		sc.Gathered(tg.url, mfs, t)
	}
	if sc.store == nil {
		return err
	}
	for name, v := range map[string]float64{"up": up, "scrape_duration_seconds": took.Seconds()} {
		b := labels.NewBuilder(extra)
		b.Set(model.MetricNameLabel, name)
		sc.store.appendSample(b.Labels(), t, v)
	}
	return err
}

// fetch gets and parses one target's metrics. Its errors name the URL.
func (sc *Scraper) fetch(ctx context.Context, tg target) ([]*dto.MetricFamily, error) {
	body, err := sc.get(ctx, tg)
	if err != nil {
		return nil, err
	}
	return parse(tg, body)
}

// get gets one target's page in the text format. Its errors name the URL.
func (sc *Scraper) get(ctx context.Context, tg target) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ScrapeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", tg.url, err)
	}
	req.Header.Set("Accept", acceptText)
	resp, err := sc.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // it would repeat the URL
		}
		return nil, fmt.Errorf("scrape %s: %w", tg.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP status %s", tg.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxScrapeBody+1))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: read body: %w", tg.url, err)
	}
	if len(body) > maxScrapeBody {
		return nil, fmt.Errorf("scrape %s: body larger than %d MiB", tg.url, maxScrapeBody>>20)
	}
	if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeTextPlain && f.FormatType() != expfmt.TypeUnknown {
		return nil, fmt.Errorf("scrape %s: content type %q, want the Prometheus text format (text/plain; version=0.0.4)", tg.url, resp.Header.Get("Content-Type"))
	}
	return body, nil
}

// parse reads a page in the text format within MaxScrapeSamples. Its
// errors name the URL.
func parse(tg target, body []byte) ([]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: not the Prometheus text format: %w", tg.url, err)
	}
	mfs := make([]*dto.MetricFamily, 0, len(byName))
	n := 0
	for _, mf := range byName {
		mfs = append(mfs, mf)
		n += samples(mf)
	}
	if n > MaxScrapeSamples {
		return nil, fmt.Errorf("scrape %s: %d samples, more than %d in one scrape (runaway label values?); nothing of it is kept", tg.url, n, MaxScrapeSamples)
	}
	return mfs, nil
}

// samples counts the samples a metric family stores: one per series, and
// a histogram's or summary's buckets or quantiles, sum and count.
func samples(mf *dto.MetricFamily) int {
	n := 0
	for _, m := range mf.GetMetric() {
		switch {
		case m.GetHistogram() != nil:
			n += len(m.GetHistogram().GetBucket()) + 2
		case m.GetSummary() != nil:
			n += len(m.GetSummary().GetQuantile()) + 2
		default:
			n++
		}
	}
	return n
}

// Check scrapes each target once, without storing anything, and returns an
// error naming the first target (in the order given) that is unreachable or
// does not serve the text format. Use it to warn before a run starts
// (Exposed does the same and says what the targets expose).
func (sc *Scraper) Check(ctx context.Context) error {
	_, err := sc.Exposed(ctx)
	return err
}

// Exposed scrapes each target once, storing nothing, and returns every
// metric name some target exposes, as a query names it: a counter's or
// gauge's name, a histogram's x_bucket, x_sum and x_count, a summary's x,
// x_sum and x_count; with the names a # TYPE line declares before it has
// any sample (Python's client declares a labelled family from the start;
// Go's shows it only with its first sample). The error names the first
// target, in the order given, that could not be scraped; the names are
// then those of the others.
func (sc *Scraper) Exposed(ctx context.Context) (map[string]bool, error) {
	pages := make([]map[string]bool, len(sc.targets))
	errs := make([]error, len(sc.targets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxConcurrentScrapes)
	for i, tg := range sc.targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			body, err := sc.get(ctx, tg)
			if err == nil {
				var mfs []*dto.MetricFamily
				if mfs, err = parse(tg, body); err == nil {
					pages[i] = names(mfs, body)
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	all := map[string]bool{}
	for _, p := range pages {
		for n := range p {
			all[n] = true
		}
	}
	return all, firstErr(errs)
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// names are the sample names of a page's families, and of the families
// its # TYPE lines declare.
func names(mfs []*dto.MetricFamily, body []byte) map[string]bool {
	out := map[string]bool{}
	add := func(name string, typ dto.MetricType) {
		switch typ {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	for _, mf := range mfs {
		add(mf.GetName(), mf.GetType())
	}
	for line := range bytes.Lines(body) {
		rest, ok := bytes.CutPrefix(line, []byte("# TYPE "))
		if !ok {
			continue
		}
		f := strings.Fields(string(rest))
		if len(f) != 2 {
			continue
		}
		typ, ok := dto.MetricType_value[strings.ToUpper(f[1])]
		if !ok {
			typ = int32(dto.MetricType_UNTYPED)
		}
		add(f[0], dto.MetricType(typ))
	}
	return out
}
