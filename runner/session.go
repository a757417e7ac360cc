package runner

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/headroom-dev/headroom/analysis"
	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/internal/rusage"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/prom"
	"github.com/headroom-dev/headroom/result"
	"github.com/headroom-dev/headroom/scenario"
	"github.com/headroom-dev/headroom/serverstats"
	"github.com/headroom-dev/headroom/transport"
)

// Common is what every kind of run needs.
type Common struct {
	Scenario *scenario.Scenario
	Target   *url.URL
	Seed     uint64
	Timeout  time.Duration // per request
	Grace    time.Duration // for users to finish their action when stopped
	// Client is how users speak to servers: TLS, compression.
	Client transport.Config
	// FreshSessions: every user's user.session starts empty (engine.Config).
	FreshSessions bool
	// SetupOnly: users set up and run no action (engine.Config); a
	// bounded run then ends once they are all set up (Bounded.Run).
	SetupOnly bool
	// SetupRetries: how often a user retries a failed setup before it
	// gives up (engine.Config: 0 the default, negative never).
	SetupRetries int
	Out          string   // result directory, probed before traffic (see result.Writer.Probe); "" writes nothing
	Command      []string // the command line, for the result (passwords in URLs redacted there)
	Version      string

	// Scrape lists Prometheus endpoints of the system under test, scraped
	// every tick for the result's server figures.
	Scrape []string
	// Profile lists Go pprof endpoints of the system under test (their
	// /debug/pprof base): their CPU profiles are taken in consecutive
	// slices of ProfileSlice (0: 10 s) through the run, and merged by
	// phase (serverprof; bounded runs).
	Profile      []string
	ProfileSlice time.Duration
	Label        string // the user's description of the run, kept in the result
	// ServerLatency names latency families of the Scrape endpoints to read
	// besides serverstats.Known (--server-latency).
	ServerLatency []serverstats.Family

	Prom     *metrics.Prom     // optional for bounded runs: live Prometheus exposition
	Print    func(int, string) // optional: where scenario print() goes
	Warn     func(string)      // optional: told at once of what the result's notes will say went wrong (a failed checkpoint)
	OnAction func(int, string) // optional: see engine.Config
	// OnTick, if set, is given every tick of the run (the terminal's
	// progress, the live view), on the run's goroutine: it must not keep
	// what it is given, nor take long. See Tick.
	OnTick func(Tick)
	Tick   time.Duration // collection period; default 1 s
	Save   time.Duration // checkpoint period; default 10 s

	// FS is where the result is written; nil is the real file system.
	FS result.FS
	// FallbackDir is where the result goes when Out cannot take it at
	// the end, in a new directory headroom-<kind>-<time>; "" is
	// os.TempDir().
	FallbackDir string

	// MaxMemory, in bytes, is how much memory headroom may use: past it
	// every user is cancelled at once and the run stops ("stopped", with
	// a note saying what the users were doing). 0: no limit.
	MaxMemory uint64
	// MaxBody is the response body limit in bytes; 0: the transport's
	// default (64 MiB).
	MaxBody int
	// SourceAddrs are the local addresses users connect from, spread by
	// user id; none: the system's choice.
	SourceAddrs []netip.Addr

	// NewFleet, if set, makes the users the run drives from the engine
	// configuration of this process's users: agents' (agents.Fleet), which
	// run the scenario's init here with local. nil: this process's engine.
	NewFleet func(local engine.Config) Fleet
	// Dial, if set, makes every connection of the run in place of TCP:
	// the users' (HTTP and WebSocket, engine.Config.Dial) and the scrape's
	// of Scrape, and the run does not try Target first. The seam where a
	// test serves the target in memory, in virtual time (testing/synctest).
	// nil: the network.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// scraper, if set, is the scraper of Scrape the run uses (a ceiling's
	// into its store, Evaluation.Scraper); nil: the session makes one.
	scraper *prom.Scraper

	addBudget time.Duration // how long setUsers may add users at a time; default 50 ms (tests set less)
	memEvery  time.Duration // between memory samples; default 20 ms
	memSample func() uint64 // bytes in use; default memlimit.Used
}

// WriteError is Run's error when a run went its course but its result
// could not be written to Out. Run still returns the result; it was
// written to Fallback instead, unless Fallback is "" (FallbackErr says
// why). The checkpoint Out held was removed so that it does not pass for
// the answer, unless Stale says why it could not be.
type WriteError struct {
	Out, Fallback    string
	Err, FallbackErr error
	Stale            error
}

func (e *WriteError) Error() string {
	msg := fmt.Sprintf("could not write the result to %s: %v", e.Out, e.Err)
	if e.Fallback == "" {
		return msg + fmt.Sprintf("; nor to a fallback directory: %v. The result is lost; the tables above are all there is", e.FallbackErr)
	}
	msg += "; the result is in " + e.Fallback + " instead"
	if e.Stale != nil {
		msg += fmt.Sprintf(" (%s still holds an older checkpoint, status %q: %v)", e.Out, result.Running, e.Stale)
	}
	return msg
}

func (e *WriteError) Unwrap() error { return e.Err }

// CheckTarget fails when nothing accepts connections at target.
func CheckTarget(target *url.URL, timeout time.Duration) error {
	host := target.Host
	if target.Port() == "" {
		port := "80"
		if target.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(target.Hostname(), port)
	}
	c, err := net.DialTimeout("tcp", host, timeout)
	if err != nil {
		return fmt.Errorf("cannot reach target %s: %v\n  hint: start the server first (e.g. headroom testbed), or fix --target", target.Redacted(), err)
	}
	return c.Close()
}

// session is one run in progress: the engine, the recorder, the figures.
type session struct {
	c *Common
	// ctx ends the run's loop: done when the caller's parent is (an
	// interrupt) or when headroom aborts the run (abort, with the cause).
	ctx, parent context.Context
	cancel      context.CancelCauseFunc
	unwatch     func() // ends the memory watch's hold on the Go memory limit

	eng      Fleet // this process's users (localFleet), or agents'
	res      *result.Result
	start    time.Time
	cpu0     time.Duration
	interval *metrics.Snapshot // the last tick
	all      *metrics.Snapshot // the whole run
	scratch  *metrics.Stat
	// think is the scenario's mean think time, the scale the generator's
	// lateness is judged on (analysis.Untrue); 0 in the open model.
	think time.Duration
	// degraded holds the seconds a fleet of agents said were degraded
	// (Fleet.Degraded), kept out of the runners' figures; degradedS is
	// how long they were.
	degraded  *metrics.Snapshot
	degradedS float64

	// failedSaves counts the checkpoints Out did not take; saveNote says
	// so, in every result from the first on.
	failedSaves int
	saveNote    string

	watch   *serverstats.Watch // nil without Common.Scrape
	scraper *prom.Scraper      // the run's one scraper of Common.Scrape; nil without

	scraping sync.WaitGroup // the scrape in flight, if any
	busy     atomic.Bool
}

func (c *Common) open(ctx context.Context, kind string) (*session, error) {
	if c.Tick <= 0 {
		c.Tick = time.Second
	}
	if c.Save <= 0 {
		c.Save = 10 * time.Second
	}
	if c.Dial == nil {
		if err := CheckTarget(c.Target, 3*time.Second); err != nil {
			return nil, err
		}
	}
	if c.Out != "" {
		if err := c.writer().Probe(c.Out); err != nil {
			return nil, fmt.Errorf("cannot write the result to %s: %v\n  hint: choose another --out, or make room there", c.Out, err)
		}
	}
	set, err := c.Client.Settings()
	if err != nil {
		return nil, err
	}
	var obs metrics.Observer
	if c.Prom != nil {
		obs = c.Prom
	}
	rec := metrics.NewRecorder(0, obs, time.Now)
	s := &session{
		c: c, parent: ctx,
		interval: metrics.NewSnapshot(), all: metrics.NewSnapshot(), scratch: metrics.NewStat(), degraded: metrics.NewSnapshot(),
		cpu0: rusage.CPU(), start: time.Now(), think: meanThink(c.Scenario),
	}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	s.unwatch = func() {}
	cfg := engine.Config{
		Scenario: c.Scenario, Target: c.Target, Seed: c.Seed, Timeout: c.Timeout, Grace: c.Grace,
		Settings: set, FreshSessions: c.FreshSessions, SetupOnly: c.SetupOnly, SetupRetries: c.SetupRetries, MaxBody: c.MaxBody, SourceAddrs: c.SourceAddrs, Recorder: rec, Print: c.Print, OnAction: c.OnAction,
		OnPanic: func(p *engine.PanicError) { s.abort(p) }, Dial: c.Dial,
	}
	if c.NewFleet != nil {
		s.eng = c.NewFleet(cfg)
		if m, ok := s.eng.(interface{ Metrics() []*dto.MetricFamily }); ok && c.Prom != nil {
			c.Prom.AddRemote(m.Metrics) // the agents' samples are observed there
		}
	} else {
		s.eng = localFleet{Engine: engine.New(cfg), rec: rec}
	}
	// init runs once, before any user and before the scrape's baseline: its
	// work on the server is setup, not the run's.
	if err := s.eng.Init(ctx); err != nil {
		s.cancel(err)
		return nil, fmt.Errorf("init failed: %w", err)
	}
	if len(c.Scrape) > 0 || c.scraper != nil {
		if err := s.startScrape(); err != nil {
			s.cancel(err)
			return nil, err
		}
	}
	host, _ := os.Hostname()
	s.res = &result.Result{
		Kind: kind, Headroom: c.Version, StartedAt: s.start,
		Config: result.Config{
			Command: RedactAll(c.Command), Scenario: c.Scenario.Path, ScenarioHash: c.Scenario.Hash, Target: c.Target.Redacted(),
			Seed: c.Seed, TimeoutS: c.Timeout.Seconds(), GraceS: c.Grace.Seconds(),
			Connections: "per-user keep-alive", Label: c.Label,
		},
		Generator: result.Generator{Host: host, GOMAXPROCS: runtime.GOMAXPROCS(0)},
	}
	configTypes(&s.res.Config, c.Scenario)
	s.unwatch = s.watchMemory()
	return s, nil
}

// configTypes records what the users of sc do: the actions and think
// time of its one user type, or each of its types.
func configTypes(cfg *result.Config, sc *scenario.Scenario) {
	weights := func(as []*scenario.Action) []result.ActionWeight {
		out := []result.ActionWeight{}
		for _, a := range as {
			out = append(out, result.ActionWeight{Name: a.Name, Weight: a.Weight})
		}
		return out
	}
	if len(sc.Types) == 1 {
		cfg.Think, cfg.Actions = sc.Types[0].ThinkSrc, weights(sc.Types[0].Actions)
		return
	}
	cfg.Actions = []result.ActionWeight{}
	for _, t := range sc.Types {
		cfg.UserTypes = append(cfg.UserTypes, result.UserType{Name: t.Name, Weight: t.Weight, Think: t.ThinkSrc, Actions: weights(t.Actions)})
	}
}

// addBatch is how many users setUsers adds between two looks at the
// clock and the run's context.
const addBatch = 256

// setUsers moves the user count towards n, and the exposed gauge with it.
// Adding many users takes a while (tens of thousands a second), so it
// stops after addBudget, or when the run ends, and the next call goes
// on: the run's loop keeps its clock and answers Ctrl-C meanwhile.
func (s *session) setUsers(n int) {
	budget := s.c.addBudget
	if budget <= 0 {
		budget = 50 * time.Millisecond
	}
	deadline := time.Now().Add(budget)
	for {
		reached := s.eng.SetUsersBy(n, addBatch) >= n
		if reached || s.ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
	}
	if s.c.Prom != nil {
		s.c.Prom.SetUsers(s.eng.Users())
	}
}

// collect drains what users recorded since the last tick into s.interval
// and s.all, appends a timeline point and returns the second as a tick,
// which headroom's /metrics takes at once; the kind adds its part and
// publishes it.
func (s *session) collect() Tick {
	s.interval.Reset()
	s.eng.Drain(s.interval)
	s.interval.Seal() // the second's burstiness, kept as the worst of the windows it merges into
	s.all.Merge(s.interval)
	p := metrics.PointOf(s.interval, s.start, s.eng.Users(), s.eng.Ready(), s.scratch)
	p.Connections = s.all.OpenSockets()
	if err := s.eng.Stopped(); err != nil {
		s.abort(err) // the run's loop ends at its next turn
	}
	if why := s.eng.Degraded(); why != "" {
		p.Degraded = true
		s.degraded.Merge(s.interval)
		s.degradedS += s.interval.End.Sub(s.interval.Start).Seconds()
	}
	s.res.Timeline = append(s.res.Timeline, p)
	t := Tick{Elapsed: s.interval.End.Sub(s.start), Users: p.Users, Ready: p.Ready, Last: p, Interval: s.interval,
		Total: s.scratch} // PointOf left the second's total there
	s.expose(t)
	return t
}

// expose gives headroom's /metrics what t says of the second: the users
// set up and, but on agents (which expose their own), how late the
// generator's starts were.
func (s *session) expose(t Tick) {
	if s.c.Prom == nil {
		return
	}
	s.c.Prom.SetReady(t.Ready)
	if _, agents := s.eng.(agentsFleet); !agents {
		s.c.Prom.AddWakes(t.Interval.Wakes)
	}
}

// stop stops every user (each within the grace period) and collects the rest.
// The run's context ends with it.
func (s *session) stop() {
	defer s.unwatch()
	defer s.cancel(context.Canceled)
	s.setUsers(0)
	s.eng.Stop()
	if len(s.c.Scenario.Types) > 1 {
		s.res.UsersByType = s.eng.UsersByType()
	}
	s.publish(s.collect()) // the last second: no kind's part, the users stopped
	s.scraping.Wait()
	if s.scraper != nil { // the state at the end of the window
		s.attempted(s.scraper.Scrape(context.Background(), time.Now()))
	}
}

// generator fills the generator figures and returns a note when the
// generator may have been the bottleneck: its CPU near saturation, or the
// load of judged (the window the run's figures come from) not what it
// meant to send, its starts late or bunched (analysis.Untrue). Its
// lateness and burstiness are the whole run's.
func (s *session) generator(judged *metrics.Snapshot) string {
	g := &s.res.Generator
	cpu := rusage.CPU() - s.cpu0
	g.CPUSeconds = cpu.Seconds()
	if el := time.Since(s.start).Seconds(); el > 0 {
		g.CPUPercent = 100 * cpu.Seconds() / el
	}
	g.LateWakeups = s.eng.Late()
	g.PeakRSSMB = rusage.PeakRSSMB()
	g.Lateness, g.Burstiness = result.LatenessOf(s.all.Wakes), result.BurstinessOf(s.all.Wakes)
	g.Untrue = ""
	if judged != nil {
		g.Untrue = analysis.Untrue(result.LatenessOf(judged.Wakes), result.BurstinessOf(judged.Wakes), s.think)
	}
	var notes []string
	if g.Untrue != "" {
		notes = append(notes, "the load was not what headroom meant to send: "+g.Untrue+"; errors and latencies may be the generator's doing, not the target's")
	}
	if a, ok := s.eng.(agentsFleet); ok {
		s.agents(a.Agents(s.degradedS)) // each agent judged on its own CPU, in its own note
		g.Overloaded = g.Overloaded || g.Untrue != ""
		return strings.Join(notes, "; ")
	}
	cpuBound := g.CPUPercent > 90*float64(g.GOMAXPROCS)
	g.Overloaded = cpuBound || g.Untrue != ""
	if cpuBound {
		notes = append(notes, fmt.Sprintf("the generator was overloaded (CPU %.0f%% of %d cores): latencies may be headroom's, not the target's",
			g.CPUPercent, g.GOMAXPROCS))
	}
	return strings.Join(notes, "; ")
}

// agents puts a run's agents in its result, and the notes they call for:
// the seconds kept out as degraded, the faults, the slow agents.
func (s *session) agents(a *result.Agents) {
	res := s.res
	res.Agents = a
	if a.DegradedS > 0 {
		res.DegradedTotals = s.degraded.Total(metrics.Request, s.scratch).Summarize("degraded", time.Duration(a.DegradedS*float64(time.Second)))
	}
	for _, f := range a.Faults {
		moved := fmt.Sprintf("its %d users moved to %d agents", f.Users, f.To)
		if f.RecoveredT > 0 {
			moved += fmt.Sprintf(", all set up again at %.1f s", f.RecoveredT)
		} else {
			moved += ", not all set up again before the end"
		}
		res.Notes = append(res.Notes, fmt.Sprintf("agent %d (%s) was lost at %.1f s (%s); %s; %.0f s marked degraded in all, kept out of the figures (degraded_totals: %d requests)",
			f.Index, f.Name, f.T, f.Reason, moved, a.DegradedS, res.DegradedTotals.Count))
	}
	for _, ag := range a.Agents {
		if ag.Outlier != "" {
			res.Notes = append(res.Notes, fmt.Sprintf("agent %d (%s): %s", ag.Index, ag.Name, ag.Outlier))
		}
		if ag.Overload {
			res.Generator.Overloaded = true
			res.Notes = append(res.Notes, fmt.Sprintf("agent %d (%s) was overloaded (CPU %.0f%% of its %d cores, %d late wake-ups): latencies may be the agent's, not the target's",
				ag.Index, ag.Name, ag.CPUPct, ag.Cores, ag.Late))
		}
	}
}

// namesNote says when request names overflowed MaxNames.
func (s *session) namesNote() string {
	if !s.eng.Overflowed() {
		return ""
	}
	return fmt.Sprintf("more than %d distinct request names: the rest are counted under %q; give requests whose URL holds ids a name= such as \"GET /items/{id}\"",
		metrics.MaxNames, metrics.OtherName)
}

func (c *Common) writer() result.Writer { return result.Writer{FS: c.FS} }

// checkpoint writes the result so far into Out, if there is one, with
// write. A failed checkpoint is retried at the next one and at the end;
// the first failure is said at once (Common.Warn) and in the notes.
func (s *session) checkpoint(write func(w result.Writer, dir string) error) {
	if s.c.Out == "" {
		return
	}
	err := write(s.c.writer(), s.c.Out)
	if err == nil {
		return
	}
	if s.failedSaves++; s.failedSaves == 1 {
		msg := fmt.Sprintf("a checkpoint of the result into %s failed %s into the run: %v; headroom tries again at every checkpoint and at the end, "+
			"where a result %s cannot take goes to a new directory (said then)", s.c.Out, time.Since(s.start).Round(time.Second), err, s.c.Out)
		s.saveNote = msg
		s.res.Notes = append(s.res.Notes, msg)
		if s.c.Warn != nil {
			s.c.Warn(msg)
		}
	}
}

// notes are the notes every result of the run starts with: a failed
// checkpoint's, if one failed.
func (s *session) notes() []string {
	if s.saveNote == "" {
		return nil
	}
	return []string{s.saveNote}
}

// save writes the final result into Out, if there is one, with write;
// when Out cannot take it, into a new fallback directory, removing the
// stale checkpoint from Out. The error is then a *WriteError.
func (s *session) save(write func(w result.Writer, dir string) error) error {
	if s.c.Out == "" {
		return nil
	}
	w := s.c.writer()
	err := write(w, s.c.Out)
	if err == nil {
		return nil
	}
	we := &WriteError{Out: s.c.Out, Err: err}
	parent := s.c.FallbackDir
	if parent == "" {
		parent = os.TempDir()
	}
	dir, ferr := w.NewDir(parent, "headroom-"+s.res.Kind+"-", s.start)
	if ferr == nil {
		ferr = write(w, dir)
	}
	if ferr != nil {
		we.FallbackErr = ferr
		return we
	}
	we.Fallback, we.Stale = dir, w.Discard(s.c.Out)
	return we
}

func sumCounts(ss []metrics.Summary) int64 {
	n := int64(0)
	for _, s := range ss {
		n += s.Count
	}
	return n
}

// ticks calls f every tick until it returns false or ctx is done; it
// returns whether ctx ended it.
func ticks(ctx context.Context, every time.Duration, f func(now time.Time) bool) (interrupted bool) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return true
		case now := <-t.C:
			if !f(now) {
				return false
			}
		}
	}
}
