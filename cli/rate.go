package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/runner"
)

// openFlags are run's flags of the open model (docs/OPEN.md): --rate or
// --rate-stages make the run one of arrivals at a rate.
type openFlags struct {
	rate   rateValue
	stages stagesValue
	poolFlags
}

// poolFlags are the open model's pool of users, for run --rate, step
// --rates and ceiling --open.
type poolFlags struct {
	maxUsers    int
	preUsers    int
	maxWait     time.Duration
	arrivals    string
	connections int
}

func (f *openFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.rate, "rate", "run the open model: arrivals at this rate, each one action on a free user, e.g. 500/s, 500 (per second), 30/m; held for --duration (docs/OPEN.md)")
	fs.Var(&f.stages, "rate-stages", `the open model with a changing rate, as k6's stages: RATE:DURATION,... each moving the rate linearly to RATE over DURATION, from --rate (default 0), e.g. "100/s:30s,500/s:60s,500/s:5m"; their sum is the measured window`)
	fs.IntVar(&f.maxUsers, "max-users", 0, "with --rate: the most users the pool may hold, each with its own connection (default: the peak rate × 1 s, at least 10: enough while each arrival takes up to a second)")
	f.poolFlags.register(fs, "--rate", "(default: --max-users, so no setup runs in the window)")
}

// register registers the pool's flags but --max-users (each command has
// its own): with is the flag they go with, pre what --pre-users defaults to.
func (f *poolFlags) register(fs *flag.FlagSet, with, pre string) {
	fs.IntVar(&f.preUsers, "pre-users", -1, "with "+with+": users set up before the measured window "+pre+"; the pool adds the rest when arrivals find no user free, dropping those")
	fs.DurationVar(&f.maxWait, "max-wait", metrics.LateArrival, "with "+with+": how long after its intended start an arrival may wait for a user to come free before it is dropped (default: the lateness it may start with and still count on time; 0: dropped at once, as k6); a wait counts in its latency from the intended start")
	fs.StringVar(&f.arrivals, "arrivals", "even", "with "+with+": how arrivals are spaced: even (the same gap between two) or poisson (independent, as many clients make)")
	fs.IntVar(&f.connections, "connections", 0, "with "+with+": the pool's users share this many keep-alive connections to the target, as a service's HTTP client does (0: each user its own); over HTTP/2 each carries many users' requests at once as streams; a wait for one counts in the latency from the intended start, not in the service time")
}

// spacing is --arrivals.
func (f *poolFlags) spacing() (engine.Spacing, error) {
	switch f.arrivals {
	case "even":
		return engine.Even, nil
	case "poisson":
		return engine.Poisson, nil
	}
	return 0, fmt.Errorf("--arrivals %q: want even or poisson", f.arrivals)
}

// refuseClosed says which of the pool's flags was given without the open
// model's flag (with), if one was; names adds the command's own.
func (f *poolFlags) refuseClosed(set map[string]bool, with string, names ...string) error {
	for _, name := range append([]string{"pre-users", "max-wait", "arrivals", "connections"}, names...) {
		if set[name] {
			return fmt.Errorf("--%s is for the open model: give %s too", name, with)
		}
	}
	return nil
}

// levels resolves the pool for step --rates or ceiling --open: maxUsers
// is the pool's bound, pre the default of --pre-users.
func (f *poolFlags) levels(set map[string]bool, maxUsers, pre int) (*runner.OpenLevels, error) {
	sp, err := f.spacing()
	if err != nil {
		return nil, err
	}
	o := &runner.OpenLevels{Arrivals: sp, MaxUsers: maxUsers, PreUsers: f.preUsers, MaxWait: f.maxWait, Connections: f.connections}
	if o.MaxUsers < 1 {
		return nil, fmt.Errorf("--max-users must be at least 1, got %d", o.MaxUsers)
	}
	if !set["pre-users"] {
		o.PreUsers = min(pre, o.MaxUsers)
	}
	if o.PreUsers < 0 || o.PreUsers > o.MaxUsers {
		return nil, fmt.Errorf("--pre-users must be 0 to --max-users (%d), got %d", o.MaxUsers, o.PreUsers)
	}
	if o.MaxWait < 0 {
		return nil, fmt.Errorf("--max-wait must be 0 or more, got %v", o.MaxWait)
	}
	if o.Connections < 0 {
		return nil, fmt.Errorf("--connections must be 0 (each user its own) or more, got %d", o.Connections)
	}
	return o, nil
}

// describePool is the pool in words: "a pool of up to 500 users (500 set
// up first); an arrival that finds no user free is dropped".
func describePool(arrivals engine.Spacing, maxUsers, preUsers int, maxWait time.Duration, connections int) string {
	wait := "an arrival that finds no user free is dropped"
	if maxWait > 0 {
		wait = fmt.Sprintf("an arrival waits up to %v for a user, then is dropped", maxWait)
	}
	conns := ""
	if connections > 0 {
		conns = fmt.Sprintf(", sharing %d connections", connections)
	}
	return fmt.Sprintf("%s arrivals; a pool of up to %d users (%d set up first)%s; %s", arrivals, maxUsers, preUsers, conns, wait)
}

// on reports whether the run is of the open model.
func (f *openFlags) on() bool { return f.rate.set || len(f.stages.stages) > 0 }

// resolve turns the flags into the runner's open model, or says what is
// wrong; nil without --rate or --rate-stages. duration is --duration.
func (f *openFlags) resolve(fs *flag.FlagSet, duration time.Duration) (*runner.Open, error) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if !f.on() {
		return nil, f.refuseClosed(set, "--rate (e.g. --rate 100/s) or --rate-stages", "max-users")
	}
	for _, name := range []string{"users", "ramp"} {
		if set[name] {
			return nil, fmt.Errorf("--%s is the closed model's: with --rate, arrivals come at the rate and --max-users bounds the pool of users that run them", name)
		}
	}
	var r engine.Rate
	switch {
	case len(f.stages.stages) > 0:
		if set["duration"] {
			return nil, errors.New("--duration with --rate-stages: the stages' durations add up to the measured window; give one or the other")
		}
		r = engine.Rate{Start: f.rate.perSecond, Stages: f.stages.stages}
	case f.rate.perSecond <= 0:
		return nil, errors.New("--rate must be more than 0 arrivals per second, e.g. --rate 100/s")
	default:
		r = engine.Constant(f.rate.perSecond, duration)
	}
	if l := r.Length(); l <= 0 {
		return nil, errors.New("--rate-stages last 0s in all: give the stages durations, e.g. 100/s:30s")
	} else if l > maxDuration {
		return nil, fmt.Errorf("--rate-stages last %v in all, longer than headroom allows (720h, 30 days); run longer tests as several runs", l)
	}
	if r.Peak() <= 0 {
		return nil, errors.New("--rate-stages never rise above 0 arrivals per second")
	}
	o := &runner.Open{Rate: r, MaxUsers: f.maxUsers, PreUsers: f.preUsers, MaxWait: f.maxWait, Connections: f.connections}
	if o.Connections < 0 {
		return nil, fmt.Errorf("--connections must be 0 (each user its own) or more, got %d", o.Connections)
	}
	sp, err := f.spacing()
	if err != nil {
		return nil, err
	}
	o.Arrivals = sp
	if !set["max-users"] {
		o.MaxUsers = runner.DefaultMaxUsers(r.Peak())
	}
	if o.MaxUsers < 1 {
		return nil, fmt.Errorf("--max-users must be at least 1, got %d", o.MaxUsers)
	}
	if !set["pre-users"] {
		o.PreUsers = o.MaxUsers
	}
	if o.PreUsers < 0 || o.PreUsers > o.MaxUsers {
		return nil, fmt.Errorf("--pre-users must be 0 to --max-users (%d), got %d", o.MaxUsers, o.PreUsers)
	}
	return o, nil
}

// describeOpen is the open model in a line: "500/s for 1m0s (even arrivals),
// a pool of 500 users (500 set up first), dropped at once".
func describeOpen(o *runner.Open) string {
	var rate string
	if len(o.Rate.Stages) == 1 && o.Rate.Stages[0].Target == o.Rate.Start {
		rate = fmt.Sprintf("%s for %v", perSecond(o.Rate.Start), o.Rate.Length())
	} else {
		parts := []string{perSecond(o.Rate.Start)}
		for _, st := range o.Rate.Stages {
			parts = append(parts, fmt.Sprintf("%s over %v", perSecond(st.Target), st.Duration))
		}
		rate = strings.Join(parts, " → ") + fmt.Sprintf(" (%v)", o.Rate.Length())
	}
	return fmt.Sprintf("open model, %s, %s", rate, describePool(o.Arrivals, o.MaxUsers, o.PreUsers, o.MaxWait, o.Connections))
}
