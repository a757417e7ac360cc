package cli

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
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
