package result

import (
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/metrics"
)

// TestCheckPhases: a phase headroom does not know, or a figure that could
// not have been recorded, is refused and named by where it is (the run's
// phases or its setup's); the phases themselves pass.
func TestCheckPhases(t *testing.T) {
	good := Phases{"tls": {Totals: metrics.Summary{Name: "all requests", Count: 3, MeanMs: 1.5}}}
	if err := checkPhases("setup.phases", good); err != nil {
		t.Errorf("good phases refused: %v", err)
	}
	for _, c := range []struct {
		ps   Phases
		want string
	}{
		{Phases{"handshake": good["tls"]}, `setup.phases: "handshake" is not a phase`},
		{Phases{"wait": {Totals: metrics.Summary{Name: "all requests", Count: -1}}}, "setup.phases.wait.totals"},
	} {
		if err := checkPhases("setup.phases", c.ps); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want an error with %q", c.ps, err, c.want)
		}
	}
}
