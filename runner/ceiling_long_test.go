//go:build long

package runner

import "time"

// The larger ceilings of TestSearchFindsTheTestbedCeiling: searches of 2.5 minutes or more,
// left out of the test command to keep it within CI's 15 minutes. scripts/test-long.sh runs
// them (go test -tags long).
func init() {
	ceilingSettings = append(ceilingSettings,
		ceilingSetting{4, 10, time.Second}, // S = 40 ms: 110 users
		ceilingSetting{8, 10, time.Second}, // 220 users
	)
}
