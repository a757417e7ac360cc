package control

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// LinearConfig configures Linear: the reference coordinator's behaviour.
// Zero values get the reference's settings.
type LinearConfig struct {
	Inc, Dec int           // users added when healthy, removed when not; default 8 and 8
	Rest     time.Duration // between decisions; default 2 s
	Max      int           // never more users than this; required
	Window   time.Duration // equilibrium window after the first alert; default 30 min
	Slope    float64       // |users per second| under which the count is flat; default 0.2
}

// DefaultLinear is the reference's settings: what a zero field of a
// LinearConfig gets, and the CLI's defaults.
var DefaultLinear = LinearConfig{Inc: 8, Dec: 8, Rest: 2 * time.Second, Window: 30 * time.Minute, Slope: 0.2}

func (c LinearConfig) withDefaults() LinearConfig {
	d := DefaultLinear
	if c.Inc <= 0 {
		c.Inc = d.Inc
	}
	if c.Dec <= 0 {
		c.Dec = d.Dec
	}
	if c.Rest <= 0 {
		c.Rest = d.Rest
	}
	if c.Window <= 0 {
		c.Window = d.Window
	}
	if c.Slope <= 0 {
		c.Slope = d.Slope
	}
	return c
}

// Linear adds Inc users every Rest while every check passes and removes
// Dec when one fires. After the first alert, once the user count has been
// flat (|slope| < Slope) over the last Window, it reports the mean user
// count over that window: the reference tool's "supported users".
type Linear struct {
	cfg        LinearConfig
	users      int
	next       time.Duration // time of the next decision
	firstAlert time.Duration // -1 until a check fires
	history    []point
	done       bool
	est        Estimate
	atMaxSince time.Duration
}

type point struct {
	t     time.Duration
	users int
}

var _ Controller = (*Linear)(nil)

// NewLinear returns the reference controller. cfg.Max must be positive.
func NewLinear(cfg LinearConfig) *Linear {
	if cfg.Max <= 0 {
		panic("control: LinearConfig.Max must be positive")
	}
	return &Linear{cfg: cfg.withDefaults(), firstAlert: -1, atMaxSince: -1}
}

// Decide implements Controller.
func (l *Linear) Decide(o Observation) Decision {
	if l.done {
		return Decision{Users: l.users, Done: true}
	}
	l.history = append(l.history, point{o.Elapsed, o.Users})
	if o.Elapsed < l.next {
		return Decision{Users: l.users}
	}
	l.next = o.Elapsed + l.cfg.Rest
	reason := ""
	// With no user running yet the checks have no data and fail closed;
	// that says nothing about load, so it is no alert.
	if o.Healthy() || o.Users == 0 {
		if l.users < l.cfg.Max {
			l.users = min(l.cfg.Max, l.users+l.cfg.Inc)
		}
	} else {
		if l.firstAlert < 0 {
			l.firstAlert = o.Elapsed
			reason = fmt.Sprintf("first alert at %d users (%v)", o.Users, o.Fired)
		}
		l.users = max(0, l.users-l.cfg.Dec)
	}
	if l.users >= l.cfg.Max && l.firstAlert < 0 {
		if l.atMaxSince < 0 {
			l.atMaxSince = o.Elapsed
		}
		if o.Elapsed-l.atMaxSince >= l.cfg.Window {
			l.done = true
			l.est = Estimate{Method: l.method(), Value: float64(l.cfg.Max), Low: float64(l.cfg.Max),
				Why: fmt.Sprintf("never unhealthy up to --max-users %d: the ceiling is above it", l.cfg.Max)}
			return Decision{Users: l.users, Done: true, Reason: l.est.Why}
		}
	}
	if l.firstAlert >= 0 && o.Elapsed-l.firstAlert >= l.cfg.Window {
		win := l.window(o.Elapsed)
		if s := slope(win); math.Abs(s) < l.cfg.Slope {
			l.done = true
			l.est = summarize(win, l.method())
			return Decision{Users: l.users, Done: true,
				Reason: fmt.Sprintf("flat over the last %v (slope %.3f users/s): mean %.0f users", l.cfg.Window, s, l.est.Value)}
		}
	}
	return Decision{Users: l.users, Reason: reason, Judged: true}
}

func (l *Linear) method() string {
	return fmt.Sprintf("linear (+%d/-%d every %v, mean over a flat %v)", l.cfg.Inc, l.cfg.Dec, l.cfg.Rest, l.cfg.Window)
}

func (l *Linear) window(now time.Duration) []point {
	i := sort.Search(len(l.history), func(i int) bool { return l.history[i].t >= now-l.cfg.Window })
	return l.history[i:]
}

// slope is the least-squares slope of users over time, in users per second.
func slope(ps []point) float64 {
	n := float64(len(ps))
	if n < 2 {
		return 0
	}
	var st, su, stt, stu float64
	for _, p := range ps {
		t, u := p.t.Seconds(), float64(p.users)
		st, su, stt, stu = st+t, su+u, stt+t*t, stu+t*u
	}
	den := n*stt - st*st
	if den == 0 {
		return 0
	}
	return (n*stu - st*su) / den
}

// summarize gives the mean users, with the 5th and 95th percentiles as the
// band the count moved in.
func summarize(ps []point, method string) Estimate {
	us := make([]float64, len(ps))
	sum := 0.0
	for i, p := range ps {
		us[i] = float64(p.users)
		sum += us[i]
	}
	sort.Float64s(us)
	q := func(f float64) float64 { return us[int(f*float64(len(us)-1))] }
	return Estimate{Method: method, Value: sum / float64(len(us)), Low: q(0.05), High: q(0.95), Found: true}
}

// Estimate implements Controller.
func (l *Linear) Estimate() Estimate {
	if l.done {
		return l.est
	}
	e := Estimate{Method: l.method(), Why: "no equilibrium yet"}
	if l.firstAlert >= 0 && len(l.history) > 0 {
		e = summarize(l.window(l.history[len(l.history)-1].t), l.method())
		e.Found, e.Why = false, fmt.Sprintf("stopped before the user count was flat for %v", l.cfg.Window)
	}
	return e
}

// Levels implements Controller: linear holds no levels.
func (l *Linear) Levels() []Level { return nil }
