package runner

// The system under test's own figures over a run (--scrape): the
// scraper, its scrapes a second in the background, the marks that bound
// a span, and the result's server figures over the window and users'
// setup.

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/prom"
	"github.com/headroom-dev/headroom/serverstats"
)

// startScrape starts watching the run's --scrape endpoints, with a
// baseline taken before any user starts, so the first window counts only
// this run's requests. Common.scraper is the scraper when given (it then
// feeds a ceiling's store too); else one is made for the watch alone.
func (s *session) startScrape() error {
	c := s.c
	sc := c.scraper
	if sc == nil {
		var client *http.Client
		if c.Dial != nil {
			client = &http.Client{Transport: &http.Transport{DialContext: c.Dial}}
		}
		var err error
		if sc, err = prom.NewScraper(nil, c.Scrape, client); err != nil {
			return err
		}
	}
	if len(c.Scrape) > 0 {
		s.watch = serverstats.New(c.Scrape, s.start, c.ServerLatency...)
		sc.Gathered = s.watch.Gathered
	}
	s.scraper = sc
	s.attempted(sc.Scrape(context.Background(), time.Now()))
	return nil
}

// attempted tells the watch, if any, how a scrape went.
func (s *session) attempted(errs []error) {
	if s.watch != nil {
		s.watch.Attempted(errs)
	}
}

// scrape scrapes the system under test in the background, unless the
// previous scrape is still going (a slow endpoint must not hold up the
// clock of the run).
func (s *session) scrape(ctx context.Context, now time.Time) {
	if s.scraper == nil || !s.busy.CompareAndSwap(false, true) {
		return
	}
	s.scraping.Add(1)
	go func() {
		defer s.scraping.Done()
		defer s.busy.Store(false)
		defer s.recover("the scrape of " + strings.Join(s.c.Scrape, ", "))
		s.attempted(s.scraper.Scrape(ctx, now))
	}()
}

// mark is the server state as of the scrape taken at the tick now (see
// serverstats.Watch.Mark), to sum up a span from or to; nil when nothing is
// scraped.
func (s *session) mark(now time.Time) *serverstats.Mark {
	if s.watch == nil {
		return nil
	}
	return s.watch.Mark(now)
}

// server fills the result's server figures over the span from..to.
func (s *session) server(from, to *serverstats.Mark) {
	if s.watch == nil {
		return
	}
	s.res.Server = s.watch.Result(from, to)
	redactServer(s.res.Server)
}

// serverSetup fills each scraped target's figures over users' setup, from
// begin (the run's start) to from (the measured window's); nothing when
// the window never began.
func (s *session) serverSetup(begin, from *serverstats.Mark) {
	if s.watch == nil || s.res.Server == nil || begin == nil || from == nil {
		return
	}
	for i, w := range s.watch.Windows(begin, from) {
		if i < len(s.res.Server.Targets) {
			s.res.Server.Targets[i].Setup = &w
		}
	}
}
