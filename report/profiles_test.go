package report

import (
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/result"
)

// The profiles' section names each phase with its CPU per unit, lists the
// cumulative functions without the serving plumbing and with generic
// shapes shortened, then the flat ones.
func TestProfilesAreReported(t *testing.T) {
	r := fixture(t, "base-1")
	r.Profiles = &result.Profiles{Targets: []string{"http://127.0.0.1:8065/debug/pprof"}, SliceS: 10,
		Slices: []result.ProfileSlice{{File: "profiles/t1-0001.pb.gz"}, {Error: "status 404"}},
		Phases: []result.ProfilePhase{{Phase: "setup", StartS: 0, EndS: 12, Slices: 1, ProfiledS: 10, CPUSeconds: 11.6, CPUCores: 1.16, PerUnitMs: 1010, Unit: "user set up",
			Cum: []result.FuncCPU{{Name: "net/http.(*conn).serve", CumS: 11.6, CumPc: 100}, {Name: "github.com/x/testbed.hashPassword", CumS: 11.4, CumPc: 98.3},
				{Name: "crypto/pbkdf2.Key[go.shape.interface { Sum([]uint8) []uint8 }]", CumS: 11.4, CumPc: 98.3}},
			Flat: []result.FuncCPU{{Name: "crypto/internal/fips140/sha256.blockSHANI", FlatS: 3.7, FlatPc: 31.9}}}}}
	md := strings.Join(strings.Fields(string(Markdown(ForResult(r)))), " ")
	mustContain(t, md, "## Server CPU profiles", "2 CPU profiles of 10 s each", "1 failed",
		"users' setup (the ramp, to the window)", "CPU 11.6 s, 1.16 cores, 1,010 ms a user set up",
		"| github.com/x/testbed.hashPassword | 11.4 | 98.3 |", `crypto/pbkdf2.Key\[...\]`, "(flat): crypto/internal/fips140/sha256.blockSHANI 31.9%")
	if strings.Contains(md, "(\\*conn).serve") {
		t.Errorf("net/http's serving in the cumulative table")
	}
}
