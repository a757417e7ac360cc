package runner

import (
	"math"
	"time"

	"github.com/headroom-dev/headroom/control"
	"github.com/headroom-dev/headroom/health"
	"github.com/headroom-dev/headroom/result"
)

// DefaultSettle is a search's settle time when none is given: the checks'
// longest window and a second more, so that a level is judged on windows
// that hold nothing but the level.
func DefaultSettle(checks []health.Check) time.Duration {
	return checksWindow(checks) + time.Second
}

// SearchConfig completes cfg, a search's flags, for its checks and model:
// the checks' longest window, the settle time (DefaultSettle unless cfg
// has one) and, in the open model, levels counted in arrivals a second,
// each rate started at once (no ramp). The CLI, an agent's coordinator and
// a test build a search the same way with it.
func SearchConfig(cfg control.SearchConfig, checks []health.Check, open *OpenLevels) control.SearchConfig {
	cfg.Window = checksWindow(checks)
	if cfg.Settle == 0 {
		cfg.Settle = DefaultSettle(checks)
	}
	if open != nil {
		cfg.RampRate, cfg.Unit, cfg.MaxFlag = math.MaxInt32, result.UnitRate, "--max-rate"
	}
	return cfg
}

// UseSearch gives c the search controller of cfg (a search's flags),
// completed for c's checks and model by SearchConfig: set c's checks
// first. c.Settle becomes the search's settle time.
func (c *Ceiling) UseSearch(cfg control.SearchConfig) {
	cfg = SearchConfig(cfg, c.Checks, c.Open)
	c.Controller, c.Settle = control.NewSearch(cfg), cfg.Settle
}

// UseLinear gives c the linear controller (the reference coordinator's),
// which steps on its own clock: no settle time.
func (c *Ceiling) UseLinear(cfg control.LinearConfig) {
	c.Controller, c.Settle = control.NewLinear(cfg), 0
}
