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
