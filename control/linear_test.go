package control

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestLinearFollowsTheReference(t *testing.T) {
	l := NewLinear(LinearConfig{Max: 10000, Window: 5 * time.Minute})
	// +8 every 2 s while healthy
	users := 0
	var targets []int
	for el := time.Duration(0); el < 6*time.Second; el += time.Second {
		users = l.Decide(Observation{Elapsed: el, Users: users}).Users
		targets = append(targets, users)
	}
	want := []int{8, 8, 16, 16, 24, 24}
	for i := range want {
		if targets[i] != want[i] {
			t.Fatalf("targets %v, want %v", targets, want)
		}
	}
}

func TestLinearSettlesAroundTheCeiling(t *testing.T) {
	l := NewLinear(LinearConfig{Max: 10000, Window: 5 * time.Minute})
	est, took := simulate(t, l, 400, 0, 2*time.Hour)
	if !est.Found {
		t.Fatalf("no equilibrium: %+v", est)
	}
	if math.Abs(est.Value-400) > 10 {
		t.Errorf("mean %v users, want about 400", est.Value)
	}
	// the ramp alone is 400 users / 4 per second = 100 s; then the window
	if took < 100*time.Second+5*time.Minute {
		t.Errorf("finished after %v, before ramp + window", took)
	}
	if !strings.Contains(est.Method, "linear") {
		t.Errorf("method %q", est.Method)
	}
}

func TestLinearNeverUnhealthy(t *testing.T) {
	l := NewLinear(LinearConfig{Max: 80, Window: time.Minute})
	est, _ := simulate(t, l, 1_000_000, 0, time.Hour)
	if est.Found || !strings.Contains(est.Why, "never unhealthy up to --max-users 80") {
		t.Errorf("estimate %+v", est)
	}
}

func TestLinearIgnoresChecksBeforeAnyUser(t *testing.T) {
	l := NewLinear(LinearConfig{Max: 100, Window: time.Minute})
	d := l.Decide(Observation{Elapsed: 0, Users: 0, Fired: []string{"no data"}})
	if d.Users != 8 || l.firstAlert >= 0 {
		t.Errorf("first decision %+v, first alert %v: checks without users must not count", d, l.firstAlert)
	}
}
