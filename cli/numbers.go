package cli

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/engine"
	"github.com/headroom-dev/headroom/runner"
)

// flagText is the text a flag was given, for flag.Value's String: a
// flag value whose parsed form lives beside it embeds it.
type flagText struct{ text string }

func (t *flagText) String() string { return t.text }

// number is a float flag that refuses NaN, infinities and values out of
// its range when parsed, with a message saying what it wants.
type number struct {
	p        *float64
	min, max float64
	open     bool   // min itself is refused
	want     string // "a probability in (0.5, 1), e.g. 0.95"
}

// numberVar defines a float flag with a default, taking values in
// [min, max] (or (min, max] when open).
func numberVar(fs *flag.FlagSet, p *float64, name string, def, min, max float64, open bool, want, usage string) {
	*p = def
	fs.Var(&number{p: p, min: min, max: max, open: open, want: want}, name, usage)
}

func (n *number) String() string {
	if n == nil || n.p == nil {
		return ""
	}
	return strconv.FormatFloat(*n.p, 'g', -1, 64)
}

func (n *number) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !finite(v) || v < n.min || v > n.max || (n.open && v == n.min) {
		return errors.New("want " + n.want)
	}
	*n.p = v
	return nil
}

func (n *number) Get() any { return *n.p }

// finite is false for NaN and the infinities.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// percent is a relative figure given in percent, e.g. 5%; held as a
// fraction (0.05). Its range is (0, 100) percent.
type percent float64

func (p *percent) String() string { return fmt.Sprintf("%g%%", 100*float64(*p)) }
func (p *percent) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err != nil || !finite(v) || v <= 0 || v >= 100 {
		return errors.New("want a percentage in (0, 100), e.g. 5%")
	}
	*p = percent(v / 100)
	return nil
}

// maxDuration is the longest any duration flag may be: a longer test is
// several runs, and sums of durations stay far from overflowing.
const maxDuration = 30 * 24 * time.Hour

// checkDurations refuses a negative or absurdly long value in any
// duration flag of fs. Flags that must be positive check that themselves.
func checkDurations(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || err != nil {
			return
		}
		d, ok := g.Get().(time.Duration)
		switch {
		case !ok:
		case d < 0:
			err = fmt.Errorf("--%s must be 0 or more, got %v", f.Name, d)
		case d > maxDuration:
			err = fmt.Errorf("--%s %v is longer than headroom allows (720h, 30 days); run longer tests as several runs", f.Name, d)
		}
	})
	return err
}

// perSecond writes a rate: "500/s", "0.5/s".
func perSecond(r float64) string { return strconv.FormatFloat(r, 'f', -1, 64) + "/s" }

// rateValue is --rate: arrivals per second.
type rateValue struct {
	perSecond float64
	set       bool
}

func (v *rateValue) String() string {
	if v == nil || !v.set {
		return ""
	}
	return perSecond(v.perSecond)
}

func (v *rateValue) Set(s string) error {
	r, err := parseRate(s)
	if err != nil {
		return err
	}
	v.perSecond, v.set = r, true
	return nil
}

// parseRate reads a rate: a number of arrivals per second ("500"), or
// per unit of time ("500/s", "30/m", "30/min", "100/h").
func parseRate(s string) (float64, error) {
	num, unit, _ := strings.Cut(strings.TrimSpace(s), "/")
	per := 1.0
	switch strings.TrimSpace(unit) {
	case "", "s", "sec", "second":
	case "m", "min", "minute":
		per = 60
	case "h", "hour":
		per = 3600
	default:
		return 0, fmt.Errorf("rate %q: the unit after / must be s, m or h, e.g. 500/s or 30/m", s)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("rate %q: want a number of arrivals, 0 or more, per s, m or h, e.g. 500/s", s)
	}
	r := v / per
	if r > 1e7 {
		return 0, fmt.Errorf("rate %q is more than 10 million arrivals a second", s)
	}
	return r, nil
}

// stagesValue is --rate-stages: RATE:DURATION,...
type stagesValue struct {
	flagText
	stages []engine.Stage
}

func (v *stagesValue) Set(s string) error {
	var stages []engine.Stage
	for i, part := range strings.Split(s, ",") {
		rate, dur, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return fmt.Errorf("stage %d %q: write RATE:DURATION, e.g. 100/s:30s", i+1, part)
		}
		r, err := parseRate(rate)
		if err != nil {
			return fmt.Errorf("stage %d: %v", i+1, err)
		}
		d, err := time.ParseDuration(strings.TrimSpace(dur))
		if err != nil || d < 0 || d > maxDuration {
			return fmt.Errorf("stage %d %q: want a duration from 0 to 720h after the colon, e.g. 100/s:30s", i+1, part)
		}
		stages = append(stages, engine.Stage{Target: r, Duration: d})
	}
	v.text, v.stages = s, stages
	return nil
}

// parseLevels reads "48,96,162" and checks the levels increase.
func parseLevels(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("required: the user counts to hold in turn, e.g. --levels 48,96,162,240")
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number of users; write e.g. --levels 48,96,162,240", strings.TrimSpace(part))
		}
		out = append(out, n)
	}
	return out, runner.CheckLevels(out)
}

// parseRates reads "100,200,400/s": whole arrivals per second (a unit
// per level, as --rate takes, or none: per second), increasing.
func parseRates(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("required: the arrival rates to hold in turn, e.g. --rates 100,200,400,800")
	}
	var out []int
	for i, part := range strings.Split(s, ",") {
		r, err := parseRate(part)
		if err != nil {
			return nil, err
		}
		n := int(math.Round(r))
		switch {
		case math.Abs(r-float64(n)) > 1e-9:
			return nil, fmt.Errorf("%q is %g arrivals a second: levels are whole arrivals per second, e.g. --rates 100,200,400", strings.TrimSpace(part), r)
		case n < 1:
			return nil, fmt.Errorf("level %d is %q: each rate must be at least 1 arrival per second", i+1, strings.TrimSpace(part))
		case i > 0 && n <= out[i-1]:
			return nil, fmt.Errorf("rates must increase: %d/s comes after %d/s; write them in increasing order, e.g. 100,200,400,800", n, out[i-1])
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}
