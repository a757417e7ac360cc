package compare

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-dev/headroom/scenario"
)

// Gate is one --fail-on limit, such as users:-5% or p99:+10%: a change of
// Key beyond Limit (relative, or percentage points for errors) in its
// sign's direction fails the comparison.
type Gate struct {
	Key   string
	Limit float64
}

// gateKeys says what each key applies to.
var gateKeys = map[string]string{
	"users":  "supported users (ceiling)",
	"rps":    "requests/s over the common requests",
	"mean":   "mean latency: the common mix and each request",
	"p50":    "median latency of each request",
	"p95":    "p95 latency of each request",
	"p99":    "p99 latency: the common mix and each request",
	"errors": "error share in percentage points: the common mix and each request",
	"server": "server-side mean time over the common mix of each family (API, store)",
	"setup":  "users' setups: mean latency of each setup request and over their common mix, and the mean time to set up",
}

// ParseFailOn parses a comma-separated list of gates: users:-5%,p99:+10%,errors:+1pp.
func ParseFailOn(s string) ([]Gate, error) {
	var out []Gate
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, val, ok := strings.Cut(part, ":")
		if _, known := gateKeys[key]; !ok || !known {
			return nil, fmt.Errorf("--fail-on %q: want KEY:CHANGE such as users:-5%% or p99:+10%%, with KEY one of %s", part, keys())
		}
		unit := "%"
		if key == "errors" {
			unit = "pp"
		}
		num, hasUnit := strings.CutSuffix(val, unit)
		v, err := strconv.ParseFloat(num, 64)
		if !hasUnit || err != nil || v == 0 || (val[0] != '+' && val[0] != '-') {
			return nil, fmt.Errorf("--fail-on %q: the change must be signed and in %s, e.g. %s:%s", part, unit, key, map[bool]string{true: "+1pp", false: "+10%"}[key == "errors"])
		}
		if unit == "%" {
			v /= 100
		}
		out = append(out, Gate{Key: key, Limit: v})
	}
	return out, nil
}

func keys() string {
	return "users, rps, mean, p50, p95, p99, errors, server, setup"
}

// Breaches lists every figure whose change passes a gate. A change counts
// when its verdict says it is real (a regression); with one run per side,
// where no verdict is possible, the measured change alone counts, so a
// single-run pipeline still gates.
func (c *Comparison) Breaches(gates []Gate) []string {
	var out []string
	check := func(g Gate, where string, m *Metric) {
		if m == nil || (m.Verdict != Regression && m.Verdict != NoVerdict) {
			return
		}
		if (g.Limit < 0 && m.Delta <= g.Limit) || (g.Limit > 0 && m.Delta >= g.Limit) {
			out = append(out, fmt.Sprintf("%s: %s %s (limit %s)", where, m.Name, m.DeltaText(), gateText(g)))
		}
	}
	for _, g := range gates {
		w := &c.Window
		switch g.Key {
		case "users":
			check(g, "ceiling", c.Users)
		case "rps":
			check(g, "window", &w.Throughput)
		case "mean":
			check(g, "window", &w.MixMean)
		case "p99":
			check(g, "window", &w.MixP99)
		case "errors":
			check(g, "window", &w.MixErrors)
		case "server":
			for _, s := range c.Server {
				for i := range s.Timings {
					check(g, s.Timings[i].Title, &s.Timings[i].Mix)
				}
			}
		case "setup":
			// Each request too: a run that signs users up and the next that
			// logs them in mix differently, so the mix alone is noisy.
			if c.Setup != nil {
				check(g, "setup", &c.Setup.MixMean)
				for i := range c.Setup.Requests {
					check(g, "setup "+c.Setup.Requests[i].Name, &c.Setup.Requests[i].Mean)
				}
				for i := range c.Setup.Actions {
					if a := &c.Setup.Actions[i]; a.Name == scenario.ReadyAction {
						check(g, "setup "+a.Name, &a.Mean)
					}
				}
			}
		}
		for i := range w.Requests {
			r := &w.Requests[i]
			switch g.Key {
			case "mean":
				check(g, r.Name, &r.Mean)
			case "p50":
				check(g, r.Name, &r.P50)
			case "p95":
				check(g, r.Name, &r.P95)
			case "p99":
				check(g, r.Name, &r.P99)
			case "errors":
				check(g, r.Name, &r.Errors)
			}
		}
	}
	return out
}

func gateText(g Gate) string {
	if g.Key == "errors" {
		return fmt.Sprintf("%s:%+gpp", g.Key, g.Limit)
	}
	return fmt.Sprintf("%s:%+g%%", g.Key, 100*g.Limit)
}
